// Communicator::split, and the two communicators split from a communicator whose ranks span several hosts, through
// which its collectives go in two levels (a host's ranks by copy engines, the hosts by the network).
#include <algorithm>
#include <sstream>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "core/env.hpp"
#include "core/log.hpp"

namespace pickle {

Communicator::Impl* Communicator::Impl::split(int color, int key) {
  const OpContext ctx{.rank = info.rank, .op = "split"};
  if (color < 0 && color != kNoColor) {
    throw InvalidArgument(cat(describe(ctx), ": color ", color, " is negative; pass a color >= 0, or "
                              "Communicator::kNoColor (-1) for a rank that joins no group"));
  }
  // Every rank splits in the same order, so the n-th split has the same number everywhere.
  const std::string prefix = cat(key_prefix, "split/", ++splits, "/");
  const std::vector<std::string> rows = gather_rows(prefix, cat(color, " ", key));
  struct Member {
    int key;
    int rank;
  };
  std::vector<Member> members;
  for (int r = 0; r < info.world_size; ++r) {
    std::istringstream row(rows[static_cast<std::size_t>(r)]);
    int their_color = 0, their_key = 0;
    if (!(row >> their_color >> their_key)) {
      throw ProtocolError(cat(describe(ctx), ": rank ", r, "'s entry in the store is not \"color key\""));
    }
    if (their_color == color) members.push_back({their_key, r});
  }
  if (color == kNoColor) return nullptr;
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });

  RankInfo group = info;
  group.world_size = static_cast<int>(members.size());
  group.local_world_size = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const int r = members[i].rank;
    if (r == info.rank) {
      group.rank = static_cast<int>(i);
      group.local_rank = group.local_world_size;
    }
    if (hosts[r] == hosts[info.rank]) ++group.local_world_size;
  }
  group.source = "split";
  Options options;
  options.rank_info = group;
  options.memory = kind;
  options.device = device;
  options.timeout_seconds = timeout_seconds;
  const SplitFrom from{store, cat(prefix, color, "/")};
  PICKLE_LOG(Debug, "comm", "split " << splits << ": color " << color << ", rank " << group.rank << " of "
                                     << group.world_size);
  return new Impl(std::move(options), &from);
}

std::optional<Communicator> Communicator::split(int color, int key) {
  Impl* group = impl_->split(color, key);
  if (group == nullptr) return std::nullopt;
  return Communicator(group);
}

Communicator::Impl::HostGroups* Communicator::Impl::host_groups() {
  if (host_groups_ || host_groups_absent) return host_groups_.get();
  if (!env::get_bool("PICKLE_COLL_HIERARCHY")) {
    host_groups_absent = true;
    return nullptr;
  }
  // Hosts in the order of their first rank, each with its ranks in rank order. Every rank computes the same layout
  // from the same identities (gathered at creation), so every rank makes the same decision here.
  std::vector<std::string> order;
  std::vector<std::vector<int>> ranks_of;  // per host of `order`
  for (int r = 0; r < info.world_size; ++r) {
    const auto host = static_cast<std::size_t>(std::find(order.begin(), order.end(), hosts[r]) - order.begin());
    if (host == order.size()) {
      order.push_back(hosts[r]);
      ranks_of.emplace_back();
    }
    ranks_of[host].push_back(r);
  }
  // One level is all there is with one host or one rank per host; the across groups need a rank of each local
  // index on every host.
  const std::size_t per_host = static_cast<std::size_t>(info.world_size) / order.size();
  bool two_levels = order.size() >= 2 && per_host >= 2;
  for (const auto& ranks : ranks_of) two_levels = two_levels && ranks.size() == per_host;
  if (!two_levels) {
    host_groups_absent = true;
    return nullptr;
  }
  const auto host_index =
      static_cast<std::size_t>(std::find(order.begin(), order.end(), hosts[info.rank]) - order.begin());
  std::vector<int> mine = ranks_of[host_index];  // a copy: ranks_of moves into the groups below
  const auto local_index = static_cast<std::size_t>(std::find(mine.begin(), mine.end(), info.rank) - mine.begin());
  std::vector<int> across_ranks;
  for (const auto& ranks : ranks_of) across_ranks.push_back(ranks[local_index]);
  std::vector<int> index_of(static_cast<std::size_t>(info.world_size));
  for (const auto& ranks : ranks_of) {
    for (std::size_t i = 0; i < ranks.size(); ++i) index_of[static_cast<std::size_t>(ranks[i])] = static_cast<int>(i);
  }
  std::sort(across_ranks.begin(), across_ranks.end());  // split ranks a group by key (here: the rank)
  // Collective: every rank gets here in the same collective call (they are issued in the same order everywhere).
  // Made once: a rank that failed to make them could not take part in a later allreduce with the ranks that did,
  // so every later call fails with the same reason.
  if (host_groups_failure) throw UnavailableError(*host_groups_failure);
  try {
    // Colors >= 0: split returns a group for each.
    Communicator host(split(static_cast<int>(host_index), info.rank));
    Communicator across(split(static_cast<int>(local_index), info.rank));
    auto listed = [](const std::vector<int>& ranks) {
      std::string text;
      for (const int r : ranks) text += cat(text.empty() ? "" : ", ", r);
      return text;
    };
    std::string host_step = cat("among the ranks of this host (", listed(mine), ")");
    std::string across_step = cat("across hosts (ranks ", listed(across_ranks), ")");
    // Their calls count in this communicator's family, and a loss in one step fails the ranks of the next.
    of(host).join_collective_family(collective_family, mine, host_step);
    of(across).join_collective_family(collective_family, across_ranks, across_step);
    host_groups_.reset(new HostGroups{std::move(host), std::move(across), mine, std::move(across_ranks),
                                      std::move(host_step), std::move(across_step), std::move(index_of),
                                      std::move(ranks_of)});
  } catch (const Error& e) {
    host_groups_failure = cat("the groups of the two-level collectives could not be made: ", e.what());
    throw;
  }
  PICKLE_LOG(Info, "comm", "collectives go in two levels: " << order.size() << " hosts of " << per_host
                                                            << " ranks; this rank is " << local_index << " on host "
                                                            << host_index);
  return host_groups_.get();
}

}  // namespace pickle
