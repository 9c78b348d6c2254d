// Collective data lost to a failure: what a rank notes, and tells the peers on its host, before a failed collective
// receive lets its streams go on without the data (comm_impl.hpp, "collective data lost to a failure").

#include <algorithm>

#include "comm/comm_impl.hpp"
#include "comm/signal_area.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/host/backoff.hpp"

namespace pickle {
namespace {

/// A call's number as the lost-data word carries it: the low 32 bits, never 0 (0 says "nothing lost"; a call whose
/// low bits are 0 is written as 1 and so taken for an earlier one: more calls fail, never fewer).
std::uint32_t word_of(std::uint64_t call) { return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(call)); }

}  // namespace

void Communicator::Impl::note_collective_loss_locked(const RequestState& recv, const std::string& reason) {
  const std::uint64_t call = recv.collective_call;
  if (call == 0) return;  // the application's message: its failure is the application's to handle
  const std::uint64_t noted = collective_lost_from.load();
  if (noted != 0 && noted <= call) return;  // an earlier call is lost already, and the peers know
  collective_lost_from.store(call);
  collective_lost_peer = recv.ctx.peer;
  collective_lost_why = reason;
  // Before the caller moves the receive's word: a peer's stream can get data computed without it only after that, so
  // the peer's end check, which runs once its stream has passed its call, finds the word set.
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (peer != info.rank && same_host[static_cast<std::size_t>(peer)]) {
      signals->store_remote(peer, comm::kCollectiveLossWord, word_of(call));
    }
  }
  PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": collective number " << call << " lost the data of peer "
                                   << recv.ctx.peer << " (" << reason << "); from it on, no collective of this "
                                   "communicator can be trusted on any rank");
}

void Communicator::Impl::note_collective_losses_with_locked(int peer, const std::string& reason) {
  for (const auto& [key, request] : peers[static_cast<std::size_t>(peer)].posted_recvs) {
    if (request->collective_call == 0 || request->error || request->landed || completed_locked(*request)) continue;
    note_collective_loss_locked(*request, reason);
  }
}

std::optional<PeerError> Communicator::Impl::collective_loss(std::uint64_t call, const std::string& prefix) const {
  if (const std::uint64_t own = collective_lost_from.load(); own != 0 && own <= call) {
    std::lock_guard lock(mutex);
    return PeerError(cat(prefix, ": this rank lost the data of peer ", collective_lost_peer, " in collective number ",
                         own, " of this communicator (", collective_lost_why, "), and its streams went on without "
                         "it: from that collective on, no rank's results can be trusted; make a new communicator"),
                     collective_lost_peer);
  }
  const std::uint32_t mine = word_of(call);
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (peer == info.rank || !same_host[static_cast<std::size_t>(peer)]) continue;
    const std::uint32_t lost = signals->load(peer, comm::kCollectiveLossWord);
    if (lost == 0 || !device::host::flag_reached(mine, lost)) continue;
    return PeerError(cat(prefix, ": peer ", peer, " lost data in collective number ", lost, " of this communicator "
                         "(one of its receives failed) and passed on what its buffers held: from that collective on, "
                         "no rank's results can be trusted; make a new communicator"),
                     peer);
  }
  return std::nullopt;
}

}  // namespace pickle
