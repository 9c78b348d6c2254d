// Rail set-up, addressing and the calls other threads make into it; its thread is in rail_progress.cpp.
#include "transport/net/rail.hpp"

#include <rdma/fi_errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include <pickle/error.hpp>

#include "transport/net/fabric_error.hpp"
#include "transport/net/rail_state.hpp"

namespace pickle::transport::net {

Rail::Rail(int index, Direction direction, SharedState& shared, const fi_info& info, const NetOptions& options,
           int lanes, std::size_t receives_per_lane, const std::vector<int>& peers)
    : index_(index), direction_(direction), shared_(shared), where_{shared.rank(), -1, "net transport set-up"} {
  // Each rail opens its own fabric and domain from a copy of the chosen fi_info (fi_domain may write to it).
  InfoPtr copy = duplicate_info(info);
  fabric_ = open_fabric(*copy, where_);
  domain_ = open_domain(fabric_.get(), *copy, where_);
  av_ = open_address_vector(domain_.get(), std::max<std::size_t>(peers.size(), 1) * static_cast<std::size_t>(lanes),
                            where_);
  // Every peer's queue must hold its lanes' own writes, their receives and the remote CQ data the peer's writes
  // bring (at most NetOptions::kMaxInflight per lane in flight on its side).
  const std::size_t cq_size =
      static_cast<std::size_t>(lanes) *
          (static_cast<std::size_t>(options.inflight_per_lane) + receives_per_lane + NetOptions::kMaxInflight) + 64;
  for (int rank : peers) {
    const OpContext where{shared.rank(), rank, "net transport set-up"};
    auto peer = std::make_unique<PeerRail>();
    peer->rank = rank;
    peer->cq = open_completion_queue(domain_.get(), cq_size, true, &peer->cq_fd, where);
    peer->lanes.resize(static_cast<std::size_t>(lanes));
    for (std::size_t l = 0; l < peer->lanes.size(); ++l) {
      Lane& lane = peer->lanes[l];
      lane.endpoint = open_endpoint(domain_.get(), *copy, av_.get(), peer->cq.get(), where);
      lane.write_ops.resize(static_cast<std::size_t>(options.inflight_per_lane));
      for (PostedOp& op : lane.write_ops) {
        op.kind = OpKind::Write;
        op.lane = static_cast<int>(l);
        lane.free_ops.push_back(&op);
      }
      lane.receive_ops.resize(receives_per_lane);
      for (PostedOp& op : lane.receive_ops) {
        op.kind = OpKind::Receive;
        op.lane = static_cast<int>(l);
        check_fabric(fi_recv(lane.endpoint.get(), nullptr, 0, nullptr, FI_ADDR_UNSPEC, &op.context), where, "fi_recv");
      }
    }
    peers_.push_back(std::move(peer));
  }
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw SystemError(cat(describe(where_), ": eventfd"), errno);
  wake_fd_ = UniqueFd(fd);
}

Rail::~Rail() {
  stop();
  close_endpoints({this});
}

Rail::PeerRail* Rail::find(int peer) const {
  for (const auto& candidate : peers_) {
    if (candidate->rank == peer) return candidate.get();
  }
  return nullptr;
}

std::vector<std::byte> Rail::endpoint_address(int peer, int lane) {
  PeerRail* state = find(peer);
  return endpoint_name(state->lanes.at(static_cast<std::size_t>(lane)).endpoint.get(),
                       OpContext{shared_.rank(), peer, "net transport set-up"});
}

void Rail::connect(int peer, int lane, std::span<const std::byte> address) {
  PeerRail* state = find(peer);
  fi_addr_t inserted_address = FI_ADDR_UNSPEC;
  const int inserted = fi_av_insert(av_.get(), address.data(), 1, &inserted_address, 0, nullptr);
  if (inserted != 1) {
    throw_fabric_error(OpContext{shared_.rank(), peer, "net transport set-up"}, "fi_av_insert",
                       inserted < 0 ? inserted : -FI_EINVAL);
  }
  state->lanes.at(static_cast<std::size_t>(lane)).remote = inserted_address;
}

bool Rail::sleeps_on_descriptors() const {
  for (const auto& peer : peers_) {
    if (peer->cq_fd < 0) return false;
  }
  return true;
}

void Rail::start() { thread_ = std::thread([this] { run(); }); }

void Rail::stop() {
  stop_.store(true);
  sleeping_.store(true);  // make wake() signal even if the thread is between rounds
  wake();
  if (thread_.joinable()) thread_.join();
}

void Rail::submit(int peer, Stripe stripe) {
  PeerRail* state = find(peer);
  {
    std::lock_guard lock(inbox_mutex_);
    if (!state->accepting) return;  // the peer failed: the write is dropped like its other pending ones
    state->incoming.push_back(std::move(stripe));
  }
  wake();
}

void Rail::wake() {
  if (!sleeping_.load()) return;
  const std::uint64_t one = 1;
  // A full eventfd counter (EAGAIN) still wakes the reader: nothing to do on failure.
  [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
}

}  // namespace pickle::transport::net
