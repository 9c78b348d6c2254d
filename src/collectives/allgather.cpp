// allgather: every rank's part goes by copy engine straight into its slot of every peer's recv buffer (no scratch,
// no SM); the rank's own part is a local copy unless it is already in place.
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/plumbing.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {

void Communicator::allgather(Stream& stream, const void* send, void* recv, std::size_t count, DataType type) {
  Impl& c = *impl_;
  const int rank = c.info.rank, world = c.info.world_size;
  OpContext ctx{.rank = rank, .op = "allgather"};
  ctx.bytes = coll::checked_bytes(ctx, count, type, 1);
  const std::size_t bytes = ctx.bytes;
  const std::size_t total = coll::checked_bytes(ctx, count, type, static_cast<std::size_t>(world));
  coll::check_stream(c, ctx, stream);
  if (bytes == 0) return;
  char* out = static_cast<char*>(recv);
  char* own_slot = out + static_cast<std::size_t>(rank) * bytes;
  const bool in_place = send == own_slot;
  coll::check_buffer(c, ctx, recv, total, "recv");
  if (!in_place) {
    coll::check_buffer(c, ctx, send, bytes, "send");
    if (coll::overlaps(send, bytes, recv, total)) {
      throw InvalidArgument(cat(describe(ctx), ": send overlaps recv without being in place (send == recv + rank "
                                               "* count elements)"));
    }
  }
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    // Peers write straight into recv: not before this rank's stream reached the call, nor this rank into theirs.
    // Every receive is posted before any ready signal or send (each waits for the peer's post).
    for (int peer = 0; peer < world; ++peer) {
      if (peer != rank) call.stream_wait_later(call.recv(peer, coll::kTagAllgather, out + peer * bytes, bytes));
    }
    // The next rank's copy runs on the caller's stream itself, the others' on side streams. With two ranks that is
    // the whole call on one stream: per call no fork event, no cross-stream wait and no wait for the send's
    // completion, on the host and on the GPU's path from one call to the next (docs/collectives.md, "Allgather").
    const int next = (rank + 1) % world;
    for (int peer = 0; peer < world; ++peer) {
      if (peer != rank) call.send_ready(peer, coll::kTagAllgather, coll::Call::kCaller);
    }
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank || peer == next) continue;
      call.await_ready(peer);  // on the peer's side stream, which forks from the caller's at the first send
      call.send(peer, coll::kTagAllgather, send, bytes);
    }
    // The own block's copy goes while the peers' ready counts are on their way, ahead of the next rank's copy: the
    // copy engine would otherwise idle through that wait and copy the block after the peer's data.
    if (!in_place) call.stream().copy(own_slot, send, bytes);
    if (next != rank) {
      call.await_ready(next, coll::Call::kCaller);
      call.send(next, coll::kTagAllgather, send, bytes, coll::Call::kCaller);
    }
    call.finish();
  });
}

}  // namespace pickle
