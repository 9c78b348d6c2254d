// A rail's thread: posts writes, reads completion queues, reposts receives, drains and closes endpoints to failed
// peers (rail_close.cpp), runs callbacks, sleeps when idle. Rail 0 also watches for silent peers and runs the
// callbacks API calls found due.
#include <poll.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/log.hpp"
#include "transport/net/fabric_error.hpp"
#include "transport/net/rail.hpp"
#include "transport/net/rail_state.hpp"

namespace pickle::transport::net {
namespace {

constexpr int kSpinRounds = 32;            // idle rounds before sleeping: a completion is often microseconds away
constexpr std::size_t kEntriesPerRead = 16;
constexpr int kReadsPerPeer = 8;           // per round, so that one busy peer cannot starve the others
constexpr int kSleepMs = 100;              // longest sleep: how late a timeout may be noticed
// Without wait descriptors (efa, shm) the thread cannot sleep until something happens: while operations are
// pending it naps about as long as the kernel's default timer slack (latency matters: NIC providers are the ones
// without descriptors), and when idle long enough not to cost a core.
constexpr long kShortNapNs = 50'000;
constexpr long kLongNapNs = 2'000'000;

}  // namespace

void Rail::run() {
  Callbacks callbacks;
  int idle_rounds = 0;
  while (!stop_.load()) {
    bool moved = false;
    {
      std::lock_guard fabric_lock(fabric_mutex_);
      try {
        moved = round(callbacks);
      } catch (const std::exception& error) {
        // Nothing in a round should throw (failures are per peer); if something does, no peer can be trusted.
        for (auto& peer : peers_) fail(*peer, cat("net transport progress failed: ", error.what()));
      }
    }
    if (index_ == 0) {
      if (shared_.check_timeouts()) moved = true;
      std::lock_guard lock(shared_.mutex);
      for (auto& callback : shared_.ready) callbacks.push_back(std::move(callback));
      shared_.ready.clear();
    }
    for (auto& callback : callbacks) {
      try {
        if (callback) callback();
      } catch (const std::exception& error) {
        PICKLE_LOG(Error, "transport", "rank " << shared_.rank() << ": a net transport callback threw: " << error.what());
      }
    }
    if (!callbacks.empty()) moved = true;
    callbacks.clear();
    if (moved) {
      idle_rounds = 0;
      continue;
    }
    if (++idle_rounds < kSpinRounds) continue;
    sleep_until_work();
    idle_rounds = 0;
  }
}

bool Rail::round(Callbacks& callbacks) {
  bool moved = false;
  for (auto& owned : peers_) {
    PeerRail& peer = *owned;
    if (peer.phase == PeerPhase::Closed) continue;
    if (peer.phase == PeerPhase::Draining) {
      moved |= drain(peer, callbacks);
      continue;
    }
    const PeerLink* link = shared_.peer(peer.rank);
    if (link->failed.load()) {
      // Another rail (or a timeout) failed the peer: close our side too.
      start_closing(peer, /*failed=*/true);
      moved = true;
      continue;
    }
    {
      std::lock_guard lock(inbox_mutex_);
      for (auto& stripe : peer.incoming) peer.to_post.push_back(std::move(stripe));
      peer.incoming.clear();
    }
    moved |= post_writes(peer);
    if (peer.phase != PeerPhase::Open) continue;
    moved |= poll_queue(peer, callbacks);
    if (peer.phase != PeerPhase::Open) continue;
    repost_receives(peer);
  }
  return moved;
}

bool Rail::post_writes(PeerRail& peer) {
  bool posted = false;
  const std::size_t lane_count = peer.lanes.size();
  while (!peer.to_post.empty()) {
    Stripe& stripe = peer.to_post.front();
    OutMessage& message = *stripe.message;
    // The next lane with room, round-robin: consecutive chunks go to different lanes, and a slow lane simply
    // takes fewer of them.
    Lane* lane = nullptr;
    if (stripe.lane >= 0) {
      Lane& fixed = peer.lanes[static_cast<std::size_t>(stripe.lane)];
      if (!fixed.free_ops.empty()) lane = &fixed;
    }
    for (std::size_t i = 0; i < lane_count && stripe.lane < 0; ++i) {
      Lane& candidate = peer.lanes[(peer.next_lane + i) % lane_count];
      if (!candidate.free_ops.empty()) {
        lane = &candidate;
        peer.next_lane = static_cast<unsigned>((peer.next_lane + i + 1) % lane_count);
        break;
      }
    }
    if (lane == nullptr) break;
    PostedOp* op = lane->free_ops.back();
    const std::uint64_t offset = stripe.next * message.chunk_bytes;
    const std::size_t length = message.bytes == 0
                                   ? 0
                                   : static_cast<std::size_t>(
                                         std::min<std::uint64_t>(message.chunk_bytes, message.bytes - offset));
    void* desc = message.descs.empty() ? nullptr : message.descs[static_cast<std::size_t>(index_)];
    const ssize_t rc =
        message.with_data
            ? fi_writedata(lane->endpoint.get(), message.src + offset, length, desc, message.id, lane->remote,
                           message.dst.addr + offset, message.dst.key, &op->context)
            : fi_write(lane->endpoint.get(), message.src + offset, length, desc, lane->remote,
                       message.dst.addr + offset, message.dst.key, &op->context);
    if (rc == -FI_EAGAIN) break;  // the provider's queue is full until completions are read
    if (rc < 0) {
      if (!message.with_data) {
        fail(peer, cat("the set-up handshake's fi_write on lane ", lane - peer.lanes.data(), " of rail ", index_,
                       " failed: ", fabric_error_text(static_cast<int>(rc))));
        return true;
      }
      fail(peer, cat("fi_writedata of ", length, " bytes (chunk ", stripe.next, " of ", message.chunks, " of message ",
                     message.id, ") failed: ", fabric_error_text(static_cast<int>(rc))));
      return true;
    }
    lane->free_ops.pop_back();
    op->message = stripe.message;
    op->bytes = length;
    posted = true;
    stripe.next += stripe.step;
    if (stripe.next >= message.chunks) peer.to_post.pop_front();
  }
  return posted;
}

bool Rail::poll_queue(PeerRail& peer, Callbacks& callbacks) {
  fi_cq_data_entry entries[kEntriesPerRead];
  bool any = false;
  std::string failure;
  for (int read = 0; read < kReadsPerPeer && failure.empty(); ++read) {
    const ssize_t n = fi_cq_read(peer.cq.get(), entries, kEntriesPerRead);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry error{};
      const ssize_t got = fi_cq_readerr(peer.cq.get(), &error, 0);
      if (got < 0) {
        failure = cat("fi_cq_readerr failed: ", fabric_error_text(static_cast<int>(got)));
        break;
      }
      if (error.err == FI_ECANCELED) continue;  // a receive cancelled by a closing endpoint
      char provider_text[256] = {};
      const char* detail =
          fi_cq_strerror(peer.cq.get(), error.prov_errno, error.err_data, provider_text, sizeof provider_text);
      const auto* op = static_cast<const PostedOp*>(error.op_context);
      std::string what = "a completion";
      if (op != nullptr && op->kind == OpKind::Write && op->message && !op->message->with_data) {
        what = cat("the set-up handshake's write on lane ", op->lane, " of rail ", index_);
      } else if (op != nullptr && op->kind == OpKind::Write && op->message) {
        what = cat("an RMA write of ", op->bytes, " bytes (message ", op->message->id, ")");
      } else if (op != nullptr && op->kind == OpKind::Receive) {
        what = "a receive for remote CQ data";
      }
      failure = cat(what, " failed: ", fabric_error_text(-error.err), "; provider: ", detail ? detail : "?");
      break;
    }
    if (n < 0) {
      failure = cat("fi_cq_read failed: ", fabric_error_text(static_cast<int>(n)));
      break;
    }
    any = true;
    for (ssize_t i = 0; i < n; ++i) {
      const fi_cq_data_entry& entry = entries[i];
      auto* op = static_cast<PostedOp*>(entry.op_context);
      if (op != nullptr && op->kind == OpKind::Write) {
        std::shared_ptr<OutMessage> message = std::move(op->message);
        const std::size_t written = op->bytes;
        peer.lanes[static_cast<std::size_t>(op->lane)].free_ops.push_back(op);
        chunks_written_.fetch_add(1, std::memory_order_relaxed);
        if (message) shared_.on_write_completed(*message, written, callbacks);
        continue;
      }
      if (op != nullptr && op->kind == OpKind::Receive) {
        Lane& lane = peer.lanes[static_cast<std::size_t>(op->lane)];
        const ssize_t rc = fi_recv(lane.endpoint.get(), nullptr, 0, nullptr, FI_ADDR_UNSPEC, &op->context);
        if (rc == -FI_EAGAIN) {
          lane.to_repost.push_back(op);
        } else if (rc < 0) {
          failure = cat("reposting a receive for remote CQ data failed: ", fabric_error_text(static_cast<int>(rc)));
        }
      }
      // Remote CQ data: a chunk of a peer's message landed. Without FI_RX_CQ_DATA its op_context is null.
      if ((entry.flags & FI_REMOTE_CQ_DATA) != 0) {
        chunks_landed_.fetch_add(1, std::memory_order_relaxed);
        shared_.on_arrival(peer.rank, static_cast<std::uint32_t>(entry.data), callbacks);
      }
    }
    if (static_cast<std::size_t>(n) < kEntriesPerRead) break;
  }
  if (!failure.empty()) {
    fail(peer, failure);
    return true;
  }
  return any;
}

void Rail::repost_receives(PeerRail& peer) {
  for (Lane& lane : peer.lanes) {
    while (!lane.to_repost.empty()) {
      PostedOp* op = lane.to_repost.back();
      const ssize_t rc = fi_recv(lane.endpoint.get(), nullptr, 0, nullptr, FI_ADDR_UNSPEC, &op->context);
      if (rc == -FI_EAGAIN) return;
      if (rc < 0) {
        fail(peer, cat("reposting a receive for remote CQ data failed: ", fabric_error_text(static_cast<int>(rc))));
        return;
      }
      lane.to_repost.pop_back();
    }
  }
}

void Rail::sleep_until_work() {
  sleeping_.store(true);
  // Look again after announcing the sleep: a submit() or failure that came before did not signal the eventfd.
  bool work = stop_.load();
  {
    std::lock_guard lock(inbox_mutex_);
    for (const auto& peer : peers_) work = work || (peer->phase == PeerPhase::Open && !peer->incoming.empty());
  }
  bool pending = false;
  bool draining = false;
  {
    std::lock_guard lock(shared_.mutex);
    if (index_ == 0) work = work || !shared_.ready.empty();
    for (const auto& peer : peers_) {
      draining = draining || peer->phase == PeerPhase::Draining;
      if (peer->phase != PeerPhase::Open) continue;
      const PeerLink* link = shared_.peer(peer->rank);
      work = work || link->failed.load();
      pending = pending || shared_.has_pending(*link);
    }
  }
  if (work) {
    sleeping_.store(false);
    return;
  }
  std::vector<pollfd> fds{{wake_fd_.get(), POLLIN, 0}};
  bool block = !draining;  // a draining peer is read again after a nap: its quiet period is measured in rounds
  {
    std::lock_guard fabric_lock(fabric_mutex_);
    std::vector<fid*> queues;
    for (const auto& peer : peers_) {
      if (peer->phase != PeerPhase::Open) continue;
      if (peer->cq_fd < 0) block = false;
      queues.push_back(&peer->cq->fid);
      fds.push_back({peer->cq_fd, POLLIN, 0});
    }
    if (block && !queues.empty()) {
      // fi_trywait says whether the descriptors can be trusted: -FI_EAGAIN means completions (or progress the
      // provider must make) are waiting, so poll again instead of sleeping.
      const int rc = fi_trywait(fabric_.get(), queues.data(), static_cast<int>(queues.size()));
      if (rc == -FI_EAGAIN) {
        sleeping_.store(false);
        return;
      }
      if (rc != 0) block = false;
    }
  }
  timespec timeout{};
  if (block) {
    timeout.tv_sec = kSleepMs / 1000;
    timeout.tv_nsec = (kSleepMs % 1000) * 1'000'000L;
  } else {
    fds.resize(1);
    timeout.tv_nsec = pending ? kShortNapNs : kLongNapNs;
  }
  (void)::ppoll(fds.data(), fds.size(), &timeout, nullptr);
  std::uint64_t drained = 0;
  [[maybe_unused]] ssize_t n = ::read(wake_fd_.get(), &drained, sizeof drained);
  sleeping_.store(false);
}

}  // namespace pickle::transport::net
