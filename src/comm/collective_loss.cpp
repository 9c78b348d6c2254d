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

void Communicator::Impl::join_collective_family(std::shared_ptr<CollectiveFamily> family, std::vector<int> ranks,
                                                std::string step) {
  leave_collective_family();
  {
    // Under the state mutex: the progress thread reads them there (note_collective_loss_locked).
    std::lock_guard lock(mutex);
    collective_family = std::move(family);
    family_ranks = std::move(ranks);
    family_step = std::move(step);
  }
  std::lock_guard lock(collective_family->mutex);
  collective_family->members.push_back(this);
  // A loss the family noted already holds for this communicator's calls too.
  if (const std::uint64_t lost = collective_family->lost_from.load(); lost != 0) publish_collective_loss(lost);
}

void Communicator::Impl::leave_collective_family() {
  std::lock_guard lock(collective_family->mutex);
  std::erase(collective_family->members, this);
}

void Communicator::Impl::note_collective_loss_locked(const RequestState& request, const std::string& reason) {
  const std::uint64_t call = request.collective_call;
  if (call == 0) return;  // the application's message: its failure is the application's to handle
  CollectiveFamily& family = *collective_family;
  std::lock_guard lock(family.mutex);
  const std::uint64_t noted = family.lost_from.load();
  if (noted != 0 && noted <= call) return;  // an earlier call is lost already, and the peers know
  family.lost_from.store(call);
  family.lost_peer = family_rank(request.ctx.peer);
  // Named by its step: the ranks in `reason` are this group's, and another step's end check may quote it.
  family.lost_why = family_step.empty() ? reason : cat(family_step, ": ", reason);
  // Before the caller moves the receive's word: a peer's stream can get data computed without it only after that, so
  // the peer's end check, which runs once its stream has passed its call, finds the word set. Into every
  // communicator of the family: the next step of a two-level collective passes the result on through another one.
  if (std::find(family.members.begin(), family.members.end(), this) == family.members.end()) {
    publish_collective_loss(call);  // still being made, or being torn down
  }
  for (const Impl* member : family.members) member->publish_collective_loss(call);
  PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": lost data in a collective (" << reason << "); from it on, no "
                                   "collective of this communicator (or of the host groups of its two-level "
                                   "collectives) can be trusted on any rank");
}

void Communicator::Impl::publish_collective_loss(std::uint64_t call) const {
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (peer != info.rank && same_host[static_cast<std::size_t>(peer)]) {
      signals->store_remote(peer, comm::kCollectiveLossWord, word_of(call));
    }
  }
}

void Communicator::Impl::note_collective_losses_with_locked(int peer, const std::string& reason, bool sends_too) {
  const PeerState& state = peers[static_cast<std::size_t>(peer)];
  for (const auto& [key, request] : state.posted_recvs) {
    if (request->collective_call == 0 || request->error || request->landed || completed_locked(*request)) continue;
    note_collective_loss_locked(*request, cat(describe(request->ctx), " (tag ", request->tag, "): ", reason));
  }
  if (!sends_too) return;
  for (const auto& [slot, send] : state.sends_in_flight) {
    if (!send || send->collective_call == 0 || send->error || completed_locked(*send)) continue;
    note_collective_loss_locked(*send, cat(describe(send->ctx), " (tag ", send->tag, "): ", reason,
                                           "; the peer's stream may complete it with stale bytes"));
  }
}

std::optional<PeerError> Communicator::Impl::collective_loss(std::uint64_t call, const std::string& prefix) const {
  CollectiveFamily& family = *collective_family;
  if (const std::uint64_t own = family.lost_from.load(); own != 0 && own <= call) {
    std::lock_guard lock(family.mutex);
    return PeerError(cat(prefix, ": this rank lost data in this collective or an earlier one (", family.lost_why,
                         "), and its streams or a peer's may have gone on without it: no rank's results can be "
                         "trusted from that collective on; make a new communicator"),
                     family.lost_peer);
  }
  const std::uint32_t mine = word_of(call);
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (peer == info.rank || !same_host[static_cast<std::size_t>(peer)]) continue;
    const std::uint32_t lost = signals->load(peer, comm::kCollectiveLossWord);
    if (lost == 0 || !device::host::flag_reached(mine, lost)) continue;
    return PeerError(cat(prefix, ": peer ", peer, " lost data in this collective or an earlier one (a message of "
                         "its failed) and may have passed on what its buffers held: no rank's results can be trusted "
                         "from that collective on; make a new communicator"),
                     family_rank(peer));
  }
  return std::nullopt;
}

int Communicator::Impl::family_rank(int peer) const {
  return family_ranks.empty() ? peer : rank_outside_group(peer, family_ranks);
}

}  // namespace pickle
