// allreduce = reduce_scatter into this rank's block + allgather of the blocks, fused chunk by chunk: as soon as a
// chunk of this rank's block is reduced it goes to every peer, while the next chunks are still arriving.
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/pipeline.hpp"
#include "collectives/plumbing.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {

void Communicator::allreduce(Stream& stream, const void* send, void* recv, std::size_t count, DataType type,
                             ReduceOp op) {
  Impl& c = *impl_;
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
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    coll::Exchange x;
    x.consume = coll::Exchange::Consume::Reduce;
    x.tag = coll::kTagAllreduceReduce;
    x.gather = true;
    x.gather_tag = coll::kTagAllreduceGather;
    x.type = type;
    x.op = op;
    x.send = static_cast<const char*>(send);
    x.recv = static_cast<char*>(recv);
    x.blocks = coll::split_blocks(count, datatype_size(type), c.info.world_size);
    x.out_offset = x.blocks.offset[static_cast<std::size_t>(c.info.rank)];
    coll::run_exchange(call, x);
    call.finish();
  });
}

}  // namespace pickle
