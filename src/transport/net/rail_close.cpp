// How a rail lets go of a peer: after a failure (on its thread) and at shutdown (after its thread stopped).
//
// Endpoints are never closed while their queue still holds completions. libfabric 1.17's ofi_rxm flushes the
// message endpoint's queue inside fi_close, and handling a cancelled operation there after the TCP connection was
// reset dereferences a context it no longer owns: rank 0 of NetTransport.PeerKilledMidTransfer crashed that way
// in about one run in ten (docs/rdma.md, "Closing endpoints"). Reading the queue until it stays quiet lets rxm
// handle those completions on its ordinary path; the close that follows then has nothing left to flush.
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "transport/net/rail.hpp"
#include "transport/net/rail_state.hpp"

namespace pickle::transport::net {
namespace {

// How long a peer's queue must stay empty before its endpoints close. The completions a reset connection leaves
// (one per posted operation and receive, cancelled or failed) come within a few milliseconds of each other.
constexpr std::int64_t kQuietNs = 20'000'000;
// After a failure, longer: over a link that drops packets the reset of a killed peer's connection may come only with
// TCP's next retransmission (its minimum timeout is 200 ms), and a completion it leaves inside fi_close crashed the
// close (docs/rdma.md, "Closing endpoints"). The failure is reported this much later.
constexpr std::int64_t kQuietAfterFailureNs = 300'000'000;
// Close anyway by then: a peer still flooding the queue must not keep the failure from being reported.
constexpr std::int64_t kDrainLimitNs = 1'000'000'000;
constexpr std::size_t kEntriesPerRead = 16;

}  // namespace

void Rail::fail(PeerRail& peer, const std::string& reason) {
  if (peer.phase != PeerPhase::Open) return;
  shared_.fail(peer.rank, reason);
  start_closing(peer, /*failed=*/true);
}

void Rail::start_closing(PeerRail& peer, bool failed) {
  if (peer.phase != PeerPhase::Open) return;
  for (Lane& lane : peer.lanes) {
    lane.to_repost.clear();
    for (PostedOp& op : lane.write_ops) op.message.reset();
  }
  peer.to_post.clear();
  {
    std::lock_guard lock(inbox_mutex_);
    peer.incoming.clear();
    peer.accepting = false;
  }
  const std::int64_t now = now_ns();
  peer.quiet_ns = failed ? kQuietAfterFailureNs : kQuietNs;
  peer.quiet_until_ns = now + peer.quiet_ns;
  peer.drain_limit_ns = now + kDrainLimitNs;
  peer.phase = PeerPhase::Draining;
}

bool Rail::discard_completions(PeerRail& peer) {
  bool any = false;
  fi_cq_data_entry entries[kEntriesPerRead];
  for (;;) {
    const ssize_t n = fi_cq_read(peer.cq.get(), entries, kEntriesPerRead);
    if (n > 0) {
      any = true;
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry error{};
      if (fi_cq_readerr(peer.cq.get(), &error, 0) < 0) return any;
      any = true;
      continue;
    }
    return any;  // -FI_EAGAIN, or an error reading the queue: nothing more to learn from it
  }
}

bool Rail::drain(PeerRail& peer, Callbacks& callbacks) {
  const std::int64_t now = now_ns();
  if (discard_completions(peer)) peer.quiet_until_ns = now + peer.quiet_ns;
  if (now < peer.quiet_until_ns && now < peer.drain_limit_ns) return false;
  close_now(peer);
  shared_.rail_closed(peer.rank, callbacks);
  return true;
}

void Rail::close_now(PeerRail& peer) {
  // Endpoints first: a queue cannot close while an endpoint is bound to it.
  for (Lane& lane : peer.lanes) lane.endpoint.reset();
  peer.cq.reset();
  peer.cq_fd = -1;
  peer.phase = PeerPhase::Closed;
}

void Rail::begin_closing() {
  std::lock_guard fabric_lock(fabric_mutex_);
  for (auto& peer : peers_) start_closing(*peer, /*failed=*/false);
}

bool Rail::closing_step() {
  // A peer that exited before us reset its connections: its queue holds completions like a failed peer's.
  std::lock_guard fabric_lock(fabric_mutex_);
  const std::int64_t now = now_ns();
  bool waiting = false;
  for (auto& peer : peers_) {
    if (peer->phase != PeerPhase::Draining) continue;
    if (discard_completions(*peer)) peer->quiet_until_ns = now + peer->quiet_ns;
    if (now >= peer->quiet_until_ns || now >= peer->drain_limit_ns) {
      close_now(*peer);
    } else {
      waiting = true;
    }
  }
  return !waiting;
}

void Rail::close_endpoints(const std::vector<Rail*>& rails) {
  // Every rail starts its quiet period at once: one after another, 2 x lanes rails would take 20 ms each.
  for (Rail* rail : rails) rail->begin_closing();
  for (;;) {
    bool closed = true;
    for (Rail* rail : rails) closed = rail->closing_step() && closed;
    if (closed) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace pickle::transport::net
