// allreduce = reduce_scatter into this rank's block + allgather of the blocks, fused chunk by chunk: as soon as a
// chunk of this rank's block is reduced it goes to every peer, while the next chunks are still arriving. With three
// or more ranks and large blocks the two halves run one after the other instead (allreduce_phased), each on its
// own schedule: see PICKLE_ALLREDUCE_SCHEDULE.
// Across hosts (ranks on several hosts, the same number on each) it goes in two levels instead: see
// allreduce_in_two_levels.
#include <algorithm>
#include <functional>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/mailbox.hpp"
#include "collectives/pipeline.hpp"
#include "collectives/placed.hpp"
#include "collectives/plumbing.hpp"
#include "collectives/two_levels.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {
namespace {

/// Runs one allreduce exchange as a whole call: the reduction of every rank's input on the fused pipeline's first
/// tag (both single-call forms use it, so that ranks which pass different counts, and so pick different forms, meet
/// a size mismatch at once rather than each waiting for a post on a tag the other never uses). `shape` sets what
/// differs between the forms: the blocks, where this rank's result goes, the gather round, the tokens.
void run_allreduce_exchange(Communicator::Impl& c, Stream& stream, const OpContext& ctx, const void* send, void* recv,
                            DataType type, ReduceOp op, const std::function<void(coll::Exchange&)>& shape) {
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    coll::Exchange x;
    x.consume = coll::Exchange::Consume::Reduce;
    x.tag = coll::kTagAllreduceReduce;
    x.type = type;
    x.op = op;
    x.send = static_cast<const char*>(send);
    x.recv = static_cast<char*>(recv);
    shape(x);
    coll::run_exchange(call, x);
    call.finish();
  });
}

/// Every rank exchanges with every peer (the fused pipeline above).
void allreduce_direct(Communicator::Impl& c, Stream& stream, const OpContext& ctx, const void* send, void* recv,
                      std::size_t count, DataType type, ReduceOp op) {
  run_allreduce_exchange(c, stream, ctx, send, recv, type, op, [&](coll::Exchange& x) {
    x.gather = true;
    x.gather_tag = coll::kTagAllreduceGather;
    x.blocks = coll::split_blocks(count, datatype_size(type), c.info.world_size);
    x.out_offset = x.blocks.offset[static_cast<std::size_t>(c.info.rank)];
  });
}

/// Two phases, each a whole collective of its own: reduce_scatter of the blocks into this rank's block of recv (the
/// pipeline), then allgather of the reduced blocks in place (the allgather's schedule, copy engines only). On an
/// NVSwitch the fused pipeline sends its reduced chunks while its input chunks still go out, two copies at once to
/// two peers, which breaks the staggered schedule's one-peer-at-a-time pattern; phased, each half keeps it (four
/// H200s: docs/collectives.md, "Allreduce").
void allreduce_phased(Communicator::Impl& c, Stream& stream, const OpContext& ctx, const void* send, void* recv,
                      std::size_t count, DataType type, ReduceOp op) {
  const std::size_t element = datatype_size(type);
  const coll::Blocks blocks = coll::split_blocks(count, element, c.info.world_size);
  char* out = static_cast<char*>(recv);
  char* mine = out + blocks.offset[static_cast<std::size_t>(c.info.rank)] * element;
  coll::reduce_scatter_blocks(c, stream, ctx, static_cast<const char*>(send), {coll::ScatterStep{blocks, mine}}, type,
                              op);
  std::vector<std::vector<coll::Region>> parts(blocks.offset.size());
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (blocks.length[r] != 0) parts[r].push_back({blocks.offset[r] * element, blocks.length[r] * element});
  }
  coll::allgather_regions(c, stream, ctx, nullptr, out, parts, coll::OwnCopy::Local);
}

/// One step: every rank sends its whole input to every peer and reduces all the inputs itself, in rank order (so
/// the result is the same on every rank): reduce_scatter's pipeline with every rank's block the whole buffer. Each
/// rank sends n - 1 times its input where the fused pipeline sends 2 (n - 1) / n of it, but the call has half the
/// steps and none of the fused pipeline's second round of messages (a post, a send and a wait per peer for the
/// reduced chunks): for small messages, where the host's work per call, not the links, sets the pace. Without the
/// ordered schedule's tokens, for the same reason (Exchange::without_tokens).
void allreduce_one_shot(Communicator::Impl& c, Stream& stream, const OpContext& ctx, const void* send, void* recv,
                        std::size_t count, DataType type, ReduceOp op) {
  run_allreduce_exchange(c, stream, ctx, send, recv, type, op, [&](coll::Exchange& x) {
    x.blocks.offset.assign(static_cast<std::size_t>(c.info.world_size), 0);
    x.blocks.length.assign(static_cast<std::size_t>(c.info.world_size), count);
    x.out_offset = 0;
    x.without_tokens = true;
  });
}

/// The one-shot allreduce through the mailboxes (mailbox.hpp): no message and no host wait per call. Where some rank
/// reaches a peer other than over ipc (decided once, by every rank at this call), the two-sided one-shot instead.
void allreduce_mailbox(Communicator::Impl& c, Stream& stream, const OpContext& ctx, const void* send, void* recv,
                       std::size_t count, DataType type, ReduceOp op) {
  bool ready = false;
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    ready = coll::mailbox_ready(call);
    if (!ready) return;
    coll::allreduce_through_mailbox(call, send, recv, count, type, op);
  });
  if (!ready) allreduce_one_shot(c, stream, ctx, send, recv, count, type, op);
}

bool one_host(const Communicator::Impl& c) {
  return std::all_of(c.same_host.begin(), c.same_host.end(), [](bool same) { return same; });
}

/// Which form this call takes (coll::allreduce_algorithm, under PICKLE_ALLREDUCE_SCHEDULE).
coll::AllreduceAlgorithm algorithm_for(Communicator::Impl& c, std::size_t count, DataType type) {
  return coll::allreduce_algorithm(coll::state_of(c).allreduce_schedule, count, datatype_size(type),
                                   c.info.world_size, one_host(c));
}

/// Two levels, for ranks on several hosts (G ranks on each): with B = count / G,
///   1. reduce_scatter among the host's ranks: block l (B elements) of the host's partial result lands in block l of
///      this rank's recv (l: this rank's index on its host);
///   2. allreduce of that block, in place, with the ranks of index l on the other hosts: now the whole result;
///   3. allgather of the blocks among the host's ranks, in place: every rank has every block.
/// Only step 2 crosses the network, with count / G elements per rank: each element crosses it once per host (twice
/// over, for its reduction and its result), where the direct algorithm sends it to every remote rank. The
/// count % G elements left over (fewer than G) go through the direct algorithm. The result is bit-identical on every
/// rank, combined host by host (the direct algorithm combines in rank order: floating-point results may differ from
/// it in the last bits).
void allreduce_in_two_levels(Communicator::Impl& c, Communicator::Impl::HostGroups& groups, Stream& stream,
                             const OpContext& ctx, const void* send, void* recv, std::size_t count, DataType type,
                             ReduceOp op) {
  const std::size_t element = datatype_size(type);
  const auto per_host = static_cast<std::size_t>(groups.host.world_size());
  const auto index = static_cast<std::size_t>(groups.host.rank());
  const std::size_t block = count / per_host;
  char* out = static_cast<char*>(recv);
  char* mine = out + index * block * element;
  if (block > 0) {
    coll::on_host(groups, ctx, [&] { groups.host.reduce_scatter(stream, send, mine, block, type, op); });
    coll::across_hosts(groups, ctx, [&] { groups.across.allreduce(stream, mine, mine, block, type, op); });
    coll::on_host(groups, ctx, [&] {
      // In place on every rank: nothing to put in place, so no relay either (the public allgather would relay under
      // PICKLE_ALLGATHER_OWN_COPY=relay, for ranks it cannot know are in place).
      Communicator::Impl& host = Communicator::Impl::of(groups.host);
      coll::allgather_regions(host, stream, coll::group_context(host, ctx), nullptr, out,
                              coll::one_block_each(groups.host.world_size(), block * element), coll::OwnCopy::Local);
    });
  }
  const std::size_t done = block * per_host;
  if (done < count) {
    allreduce_direct(c, stream, ctx, static_cast<const char*>(send) + done * element, out + done * element,
                     count - done, type, op);
  }
}

}  // namespace

void Communicator::allreduce(Stream& stream, const void* send, void* recv, std::size_t count, DataType type,
                             ReduceOp op) {
  Impl& c = *impl_;
  coll::NumberedCall numbered(c);  // first: every rank numbers every call, whatever it then runs
  OpContext ctx{.rank = c.info.rank, .op = "allreduce"};
  ctx.bytes = coll::checked_bytes(ctx, count, type, 1);
  const std::size_t bytes = ctx.bytes;
  coll::check_stream(c, ctx, stream);
  if (bytes == 0) return;
  coll::check_buffer(c, ctx, send, bytes, "send");
  coll::check_buffer(c, ctx, recv, bytes, "recv");
  if (send != recv && coll::overlaps(send, bytes, recv, bytes)) {
    throw InvalidArgument(cat(describe(ctx), ": send and recv overlap without being the same buffer (in-place "
                                             "is send == recv)"));
  }
  // avg stays direct: averaging the hosts' averages would truncate integers twice.
  if (op != ReduceOp::Avg) {
    Impl::HostGroups* groups = coll::two_level_groups(c, ctx);
    if (groups != nullptr) return allreduce_in_two_levels(c, *groups, stream, ctx, send, recv, count, type, op);
  }
  const coll::AllreduceSchedule schedule = coll::state_of(c).allreduce_schedule;
  if (c.info.world_size > 1 && one_host(c) &&
      (schedule == coll::AllreduceSchedule::Auto || schedule == coll::AllreduceSchedule::Mailbox)) {
    coll::decide_mailboxes(c, stream, ctx);
  }
  switch (algorithm_for(c, count, type)) {
    case coll::AllreduceAlgorithm::OneShot: return allreduce_one_shot(c, stream, ctx, send, recv, count, type, op);
    case coll::AllreduceAlgorithm::Mailbox: return allreduce_mailbox(c, stream, ctx, send, recv, count, type, op);
    case coll::AllreduceAlgorithm::Phased: return allreduce_phased(c, stream, ctx, send, recv, count, type, op);
    case coll::AllreduceAlgorithm::Fused: return allreduce_direct(c, stream, ctx, send, recv, count, type, op);
  }
}

}  // namespace pickle
