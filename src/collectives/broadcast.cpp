// broadcast: the root's copy engine writes its buffer straight into every peer's recv buffer (no SM). Non-root ranks
// ignore `send`.
#include <vector>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/plumbing.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {

void Communicator::broadcast(Stream& stream, const void* send, void* recv, std::size_t count, DataType type,
                             int root) {
  Impl& c = *impl_;
  const int rank = c.info.rank, world = c.info.world_size;
  OpContext ctx{.rank = rank, .op = "broadcast"};
  ctx.bytes = coll::checked_bytes(ctx, count, type, 1);
  const std::size_t bytes = ctx.bytes;
  if (root < 0 || root >= world) {
    throw InvalidArgument(cat(describe(ctx), ": root ", root, " is not a rank of this communicator (world size ",
                              world, ")"));
  }
  coll::check_stream(c, ctx, stream);
  if (bytes == 0) return;
  coll::check_buffer(c, ctx, recv, bytes, "recv");
  if (rank == root) {
    coll::check_buffer(c, ctx, send, bytes, "send");
    if (send != recv && coll::overlaps(send, bytes, recv, bytes)) {
      throw InvalidArgument(cat(describe(ctx), ": send and recv overlap without being the same buffer (in-place "
                                               "is send == recv)"));
    }
  }
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    // The root writes straight into the peers' recv, each only once that peer's stream has reached the call.
    if (rank == root) {
      std::vector<Request> ready(static_cast<std::size_t>(world));
      for (int peer = 0; peer < world; ++peer) {
        if (peer != rank) ready[static_cast<std::size_t>(peer)] = call.post_ready_message(peer);
      }
      for (int peer = 0; peer < world; ++peer) {
        if (peer == rank) continue;
        call.await_ready_message(peer, ready[static_cast<std::size_t>(peer)]);
        call.send(peer, coll::kTagBroadcast, send, bytes);
      }
      if (send != recv) call.stream().copy(recv, send, bytes);
    } else {
      call.stream_wait_later(call.recv(root, coll::kTagBroadcast, recv, bytes));
      call.send_ready_message(root);
    }
    call.finish();
  });
}

}  // namespace pickle
