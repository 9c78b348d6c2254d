// reduce_scatter: block p of every rank's input goes to rank p (copy engines, into scratch), which reduces the
// blocks it received with its own, chunk by chunk (pipeline.cpp). Across hosts (ranks on several hosts, the same
// number on each) it goes in two levels instead: see reduce_scatter_in_two_levels.
#include <algorithm>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/pipeline.hpp"
#include "collectives/placed.hpp"
#include "collectives/plumbing.hpp"
#include "collectives/two_levels.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {
namespace coll {

void reduce_scatter_blocks(Communicator::Impl& comm, Stream& stream, const OpContext& ctx, const char* send,
                           const std::vector<ScatterStep>& steps, DataType type, ReduceOp op) {
  run_collective(comm, stream, ctx, [&](Call& call) {
    for (const ScatterStep& step : steps) {
      Exchange x;
      x.consume = Exchange::Consume::Reduce;
      x.tag = kTagReduceScatter;
      x.type = type;
      x.op = op;
      x.send = send;
      x.recv = step.recv;
      x.blocks = step.blocks;
      x.out_offset = 0;
      run_exchange(call, x);
    }
    call.finish();
  });
}

}  // namespace coll

namespace {

/// Where the two-level reduce_scatter keeps the hosts' partial results between its steps: `bytes` of the
/// communicator's kind, kept for later calls. `stream` first waits for the previous call's readers, which may have
/// run on another stream. When too small it is replaced, by one at least twice as large where that fits (else of
/// `bytes`), and the old one is kept, not freed (CollectiveState::retired): so the previous readers need no host wait.
char* partials_buffer(Communicator::Impl& c, Stream& stream, std::size_t bytes) {
  coll::CollectiveState& state = coll::state_of(c);
  if (state.partials_read) stream.impl().wait(*state.partials_read);
  if (!state.partials || state.partials->bytes() < bytes) {
    std::unique_ptr<device::Allocation> grown;
    if (state.partials) {
      try {
        grown = device::allocate(c.kind, std::max(bytes, 2 * state.partials->bytes()), std::max(0, c.device));
      } catch (const Error&) {
        // The doubled size does not fit: the size asked for may (below).
      }
    }
    if (!grown) grown = device::allocate(c.kind, bytes, std::max(0, c.device));
    if (state.partials) state.retired.push_back(std::move(state.partials));
    state.partials = std::move(grown);
  }
  return static_cast<char*>(state.partials->data());
}

/// Two levels, for ranks on several hosts (G ranks on each, H hosts; docs/collectives.md "Across hosts: two levels"):
///   1. reduce_scatter among the host's ranks, once per host h: block i is the input block of host h's rank of index
///      i, so this rank (index l) gets the host's partial result for the rank of index l on every host, into the
///      partials buffer (H blocks, in the order of this rank's across group);
///   2. reduce_scatter of the partials with the ranks of index l on the other hosts, into recv.
/// Only step 2 crosses the network, with (H - 1) blocks per rank where the direct algorithm sends (H - 1) G.
void reduce_scatter_in_two_levels(Communicator::Impl& c, Communicator::Impl::HostGroups& groups, Stream& stream,
                                  const OpContext& ctx, const char* send, char* recv, std::size_t count,
                                  DataType type, ReduceOp op) {
  const std::size_t bytes = count * datatype_size(type);
  const std::size_t hosts = groups.ranks_of.size();
  const auto index = static_cast<std::size_t>(groups.host.rank());
  char* partials = partials_buffer(c, stream, hosts * bytes);
  std::vector<coll::ScatterStep> steps;
  for (const std::vector<int>& ranks : groups.ranks_of) {
    coll::ScatterStep step;
    for (int r : ranks) {
      step.blocks.offset.push_back(static_cast<std::size_t>(r) * count);
      step.blocks.length.push_back(count);
    }
    // Its place among the partials: where the across group has this host's rank of this rank's index.
    const auto& across = groups.across_ranks;
    const auto slot = static_cast<std::size_t>(std::find(across.begin(), across.end(), ranks[index]) - across.begin());
    step.recv = partials + slot * bytes;
    steps.push_back(std::move(step));
  }
  Communicator::Impl& host = Communicator::Impl::of(groups.host);
  coll::on_host(groups, ctx, [&] {
    coll::reduce_scatter_blocks(host, stream, coll::group_context(host, ctx), send, steps, type, op);
  });
  coll::across_hosts(groups, ctx, [&] { groups.across.reduce_scatter(stream, partials, recv, count, type, op); });
  coll::CollectiveState& state = coll::state_of(c);
  if (!state.partials_read) state.partials_read = device::make_ordering_event(c.kind, std::max(0, c.device));
  stream.impl().record(*state.partials_read);
}

}  // namespace

void Communicator::reduce_scatter(Stream& stream, const void* send, void* recv, std::size_t count, DataType type,
                                  ReduceOp op) {
  Impl& c = *impl_;
  coll::NumberedCall numbered(c);  // first: every rank numbers every call, whatever it then runs
  const int rank = c.info.rank, world = c.info.world_size;
  OpContext ctx{.rank = rank, .op = "reduce_scatter"};
  ctx.bytes = coll::checked_bytes(ctx, count, type, 1);
  const std::size_t bytes = ctx.bytes;
  const std::size_t total = coll::checked_bytes(ctx, count, type, static_cast<std::size_t>(world));
  coll::check_stream(c, ctx, stream);
  if (bytes == 0) return;
  coll::check_buffer(c, ctx, send, total, "send");
  coll::check_buffer(c, ctx, recv, bytes, "recv");
  // In place: the result over this rank's own block (NCCL's form), or at the start of the input (send == recv).
  const char* own_block = static_cast<const char*>(send) + static_cast<std::size_t>(rank) * bytes;
  if (recv != own_block && recv != send && coll::overlaps(send, total, recv, bytes)) {
    throw InvalidArgument(cat(describe(ctx), ": recv overlaps send without being in place (recv == send + rank * "
                                             "count elements, or recv == send)"));
  }
  // avg stays direct: averaging the hosts' averages would truncate integers twice.
  if (op != ReduceOp::Avg) {
    Impl::HostGroups* groups = coll::two_level_groups(c, ctx);
    if (groups != nullptr) {
      return reduce_scatter_in_two_levels(c, *groups, stream, ctx, static_cast<const char*>(send),
                                          static_cast<char*>(recv), count, type, op);
    }
  }
  coll::reduce_scatter_blocks(c, stream, ctx, static_cast<const char*>(send),
                              {coll::ScatterStep{coll::equal_blocks(count, world), static_cast<char*>(recv)}}, type,
                              op);
}

}  // namespace pickle
