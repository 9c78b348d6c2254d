// alltoall: block p of this rank's send buffer goes to block `rank` of peer p's recv buffer, by copy engine, in the
// same chunks whether a rank works in place or not (so that the ranks' message sequences always match). Out of place,
// the chunks land straight in recv. In place (send == recv), a block cannot be overwritten before it was sent, so
// the chunks land in scratch and are copied into place once this rank's own chunk to that peer is out
// (pipeline.cpp). No SM either way.

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/pipeline.hpp"
#include "collectives/plumbing.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {

void Communicator::alltoall(Stream& stream, const void* send, void* recv, std::size_t count, DataType type) {
  Impl& c = *impl_;
  coll::NumberedCall numbered(c);  // first: every rank numbers every call, whatever it then runs
  const int rank = c.info.rank, world = c.info.world_size;
  OpContext ctx{.rank = rank, .op = "alltoall"};
  ctx.bytes = coll::checked_bytes(ctx, count, type, 1);
  const std::size_t bytes = ctx.bytes;
  const std::size_t total = coll::checked_bytes(ctx, count, type, static_cast<std::size_t>(world));
  coll::check_stream(c, ctx, stream);
  if (bytes == 0) return;
  coll::check_buffer(c, ctx, send, total, "send");
  coll::check_buffer(c, ctx, recv, total, "recv");
  const bool in_place = send == recv;
  if (!in_place && coll::overlaps(send, total, recv, total)) {
    throw InvalidArgument(cat(describe(ctx), ": send and recv overlap without being the same buffer (in-place "
                                             "is send == recv)"));
  }
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    // Out of place, peers write straight into recv: not before this rank's stream reached the call, nor this rank
    // into theirs. In place needs no such handshake (chunks land in scratch), but has it too, so that the ranks' ready
    // counts do not depend on which of them work in place. Either way the ready signals go once the first receives
    // are posted, each after the peer's own post arrived (Call::send_ready), and before the first send.
    auto handshake = [&] {
      for (int peer = 0; peer < world; ++peer) {
        if (peer != rank) call.send_ready(peer, coll::kTagAlltoall);
      }
      for (int peer = 0; peer < world; ++peer) {
        if (peer != rank) call.await_ready(peer);
      }
    };
    if (in_place) {
      coll::Exchange x;
      x.consume = coll::Exchange::Consume::CopyIntoPlace;
      x.tag = coll::kTagAlltoall;
      x.type = type;
      x.send = in;
      x.recv = out;
      x.blocks = coll::equal_blocks(count, world);
      x.before_first_send = handshake;
      coll::run_exchange(call, x);
      call.finish();
      return;
    }
    const std::size_t element = datatype_size(type);
    const std::size_t chunk = coll::chunk_elements(c.kind, count, element, world, call.state().chunk_bytes) * element;
    // The sends follow PICKLE_PIPELINE_SCHEDULE, as in place: staggered, one side stream for every peer, taken
    // rank + 1 first, so that at each step every rank copies to one peer and is copied to by one (four H200s:
    // 1.33-1.38x the parallel pattern, a side stream per peer, at 32-128 MiB, even at 2 GiB; docs/collectives.md).
    // Shared from before the handshake, so that the sends follow the ready waits on the same stream.
    if (call.state().pipeline_staggered) call.share_side_streams();
    // Chunk by chunk, receives before sends: every rank's posts of chunk k precede its sends of chunk k, and the
    // completion slots of earlier chunks free up while later ones are posted.
    // The same tokens as in place when the schedule is ordered (send_chunk_in_order), so that ranks that differ in
    // working in place still raise and await the same ones.
    const std::size_t chunks = coll::ceil_div(bytes, chunk);
    const bool ordered = call.state().pipeline_ordered;
    coll::owe_ordered_tokens(call, chunks, ordered);
    for (std::size_t k = 0; k < chunks; ++k) {
      const std::size_t begin = k * chunk, length = std::min(chunk, bytes - begin);
      for (int peer = 0; peer < world; ++peer) {
        if (peer != rank) {
          call.stream_wait_later(call.recv(peer, coll::kTagAlltoall, out + peer * bytes + begin, length));
        }
      }
      if (k == 0) handshake();
      coll::send_chunk_in_order(call, k, chunks, ordered, [&](int peer) {
        return call.send(peer, coll::kTagAlltoall, in + peer * bytes + begin, length);
      });
    }
    call.copy_local(out + rank * bytes, in + rank * bytes, bytes);
    call.finish();
  });
}

}  // namespace pickle
