#pragma once
// What the collectives that go in two levels across hosts share (docs/collectives.md, "Across hosts: two levels"):
// the groups, and their errors as errors of the whole call (the step and the group's ranks in front).

#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "core/error_text.hpp"
#include "core/format.hpp"

namespace pickle::coll {

/// `error`, thrown by a step in a group whose ranks are `ranks` (in group order), as an error of the whole call:
/// `prefix` in front, and a PeerError's peer translated from the group's rank to the communicator's.
[[noreturn]] inline void rethrow_from_group(const Error& error, const std::string& prefix,
                                            const std::vector<int>& ranks) {
  if (const auto* peer = dynamic_cast<const PeerError*>(&error)) {
    throw PeerError(cat(prefix, ": ", without_head(error.what())), rank_outside_group(peer->peer(), ranks));
  }
  rethrow_with_prefix(error, prefix);
}

/// Runs `step` in a group whose ranks are `ranks`; its errors become the call's, with `prefix` in front
/// (rethrow_from_group). While it runs, the family's step prefix is `prefix` too, so that the errors the group's
/// end-of-call checks report later on the stream start the same way (coll::Call::finish; they name their peers as
/// the application's ranks through the group's family_ranks, which are `ranks`).
template <class Step>
void run_in_group(CollectiveFamily& family, const std::vector<int>& ranks, const std::string& prefix, Step&& step) {
  struct StepPrefix {
    CollectiveFamily& family;
    ~StepPrefix() { family.step_prefix.clear(); }
  } scoped{family};
  family.step_prefix = prefix;
  try {
    step();
  } catch (const Error& e) {
    rethrow_from_group(e, prefix, ranks);
  }
}

/// `step` of the call `ctx`, among the ranks of this rank's host: "among the ranks of this host (...)" in front of
/// its errors.
template <class Step>
void on_host(Communicator::Impl::HostGroups& groups, const OpContext& ctx, Step&& step) {
  run_in_group(*Communicator::Impl::of(groups.host).collective_family, groups.host_ranks,
               cat(describe(ctx), ": ", groups.host_step), step);
}

/// `step` of the call `ctx`, with the ranks of this rank's index on the other hosts: "across hosts (ranks ...)" in
/// front of its errors.
template <class Step>
void across_hosts(Communicator::Impl::HostGroups& groups, const OpContext& ctx, Step&& step) {
  run_in_group(*Communicator::Impl::of(groups.across).collective_family, groups.across_ranks,
               cat(describe(ctx), ": ", groups.across_step), step);
}

/// The context of a step that runs inside `group` for the call `ctx`: the same operation and size, the rank in the
/// group (errors of the step then read as the group's own calls', as when it calls the group's public methods).
inline OpContext group_context(const Communicator::Impl& group, const OpContext& ctx) {
  return OpContext{.rank = group.info.rank, .op = ctx.op, .bytes = ctx.bytes};
}

/// The communicator's two-level groups (Impl::host_groups: collective, made in the first call that asks), or null
/// when they do not apply; an error in making them names the call `ctx`.
inline Communicator::Impl::HostGroups* two_level_groups(Communicator::Impl& comm, const OpContext& ctx) {
  try {
    return comm.host_groups();
  } catch (const Error& e) {
    rethrow_with_prefix(e, cat(describe(ctx), ": making the groups of the two-level collectives (every rank makes "
                                              "them in its first allreduce, broadcast, allgather or reduce_scatter; "
                                              "did a rank fail its arguments?)"));
  }
}

}  // namespace pickle::coll
