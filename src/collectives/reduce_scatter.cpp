// reduce_scatter: block p of every rank's input goes to rank p (copy engines, into scratch), which reduces the
// blocks it received with its own, chunk by chunk (pipeline.cpp).
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/pipeline.hpp"
#include "collectives/plumbing.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {

void Communicator::reduce_scatter(Stream& stream, const void* send, void* recv, std::size_t count, DataType type,
                                  ReduceOp op) {
  Impl& c = *impl_;
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
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    coll::Exchange x;
    x.consume = coll::Exchange::Consume::Reduce;
    x.tag = coll::kTagReduceScatter;
    x.type = type;
    x.op = op;
    x.send = static_cast<const char*>(send);
    x.recv = static_cast<char*>(recv);
    x.blocks = coll::equal_blocks(count, world);
    x.out_offset = 0;
    coll::run_exchange(call, x);
    call.finish();
  });
}

}  // namespace pickle
