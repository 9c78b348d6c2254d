#include "collectives/pipeline.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <pickle/error.hpp>

#include "collectives/reduce.hpp"
#include "comm/comm_impl.hpp"

namespace pickle::coll {

#if PICKLE_HAVE_CUDA
namespace {

ReduceTask reduce_task(const Call& call, DataType type, ReduceOp op, void* out, const std::vector<const void*>& inputs,
                       std::size_t count) {
  ReduceTask task;  // run_exchange checked that the inputs fit (check_reduction_fits)
  task.type = type;
  task.op = op;
  task.nranks = call.world();
  task.out = out;
  task.count = count;
  task.ninputs = static_cast<int>(inputs.size());
  std::copy(inputs.begin(), inputs.end(), task.inputs);
  return task;
}

}  // namespace
#endif

void enqueue_reduce(Call& call, DataType type, ReduceOp op, void* out, const std::vector<const void*>& inputs,
                    std::size_t count) {
  if (count == 0) return;
  const int nranks = call.world();
  if (call.kind() == MemoryKind::Host) {
    call.stream().host_callback([type, op, nranks, out, inputs, count] {
      reduce_host(type, op, nranks, out, inputs.data(), static_cast<int>(inputs.size()), count);
    });
    return;
  }
#if PICKLE_HAVE_CUDA
  launch_reduce_cuda(reduce_task(call, type, op, out, inputs, count), call.stream().native_handle(), call.device(),
                     call.state().reduce_ctas);
#else
  throw UnavailableError(cat(describe(call.ctx()), ": CUDA memory in a build without CUDA"));
#endif
}

int gated_cta_budget(const Call& call) { return std::min(call.state().reduce_ctas, kMaxGatedCtas); }

void enqueue_gated_reduce(Call& call, DataType type, ReduceOp op, void* out, const std::vector<const void*>& inputs,
                          std::size_t count, const ReduceGate& gate, int max_ctas) {
#if PICKLE_HAVE_CUDA
  launch_reduce_cuda(reduce_task(call, type, op, out, inputs, count), call.stream().native_handle(), call.device(),
                     std::min(gated_cta_budget(call), max_ctas), &gate);
  // A synchronize that times out names the kernel's wait (its last peer's word), not an older stream wait.
  const int last = gate.waits.count - 1;
  if (last >= 0) call.stream().note_wait_in_kernel(gate.waits.device[last], gate.waits.value[last], gate.waits.count);
#else
  (void)type, (void)op, (void)out, (void)inputs, (void)count, (void)gate, (void)max_ctas;
  throw UnavailableError(cat(describe(call.ctx()), ": a gated reduction in a build without CUDA"));
#endif
}

void check_reduction_fits(const OpContext& ctx, MemoryKind kind, int world) {
  if (kind == MemoryKind::Cuda && world > kMaxReduceInputs) {
    throw UnavailableError(cat(describe(ctx), ": the CUDA reduction takes at most ", kMaxReduceInputs,
                               " ranks; this communicator has ", world));
  }
}

void send_chunk_in_order(Call& call, std::size_t k, std::size_t chunks, bool ordered,
                         const std::function<Request(int)>& send) {
  // PICKLE_PIPELINE_SCHEDULE=ordered (three ranks or more): each rank receives the chunks in the schedule's order,
  // one at a time. At step s of chunk k rank r copies into p = r + s, which rank r + 1 copied into at step s - 1 (or,
  // at step 1, rank r + 2 at step n - 1 of chunk k - 1); r's copy waits for that rank's token, raised once its copy
  // is done. Staggered without tokens keeps the order only while the ranks run in step: a rank that starts or falls
  // behind by part of a copy then shares a receiver with another sender for the rest of the call, while a third
  // receiver idles, and nothing brings the ranks back in step (docs/collectives.md, "Pipeline"). Every rank raises
  // and awaits the same tokens in every call, whatever its blocks' lengths (empty sends included), and no call
  // awaits a token of another (the first copy of a call waits for none).
  const int rank = call.rank(), world = call.world();
  auto peer_at = [&](int step) { return (rank + step) % world; };
  for (int step = 1; step < world; ++step) {
    if (ordered && step > 1) call.await_token(peer_at(1));
    if (ordered && step == 1 && k > 0) call.await_token(peer_at(2));
    Request sent = send(peer_at(step));
    // The rank that copies into this peer next: rank - 1 at the next step, rank - 2 at step 1 of the next chunk.
    if (ordered && step < world - 1) call.send_token(peer_at(world - 1), sent);
    if (ordered && step == world - 1 && k + 1 < chunks) call.send_token(peer_at(world - 2), sent);
  }
}

void owe_ordered_tokens(Call& call, std::size_t chunks, bool ordered) {
  const int rank = call.rank(), world = call.world();
  if (!ordered || chunks == 0) return;
  // Ordered sends share one side stream per lane; shared from here on, so that the tokens abandon raises go on the
  // stream of the tokens raised before (by earlier calls too), and the peer's word only grows.
  call.share_side_streams();
  // As send_chunk_in_order raises them: to rank - 1 after each of steps 1 to n - 2 of every chunk, to rank - 2
  // after step n - 1 of every chunk but the last.
  call.owe_tokens((rank + world - 1) % world, static_cast<std::uint32_t>(chunks * static_cast<std::size_t>(world - 2)));
  call.owe_tokens((rank + world - 2) % world, static_cast<std::uint32_t>(chunks - 1));
}

void run_exchange(Call& call, const Exchange& x) {
  const int rank = call.rank(), world = call.world();
  // Before the first message: failing after receives were posted would break the communicator for good.
  if (x.consume == Exchange::Consume::Reduce) check_reduction_fits(call.ctx(), call.kind(), world);
  const std::size_t element = datatype_size(x.type);
  const std::size_t longest = x.blocks.max_length();
  if (longest == 0) return;
  if (world == 1) {
    // A world of one: the sum, product, minimum, maximum or average of one contribution is the contribution, and
    // there is nobody to exchange with. One copy (none in place) instead of a reduction kernel.
    const char* from = x.send + x.blocks.offset[0] * element;
    char* to = x.recv + x.out_offset * element;
    if (x.consume == Exchange::Consume::Reduce && from != to) {
      call.copy_local(to, from, x.blocks.length[0] * element);
    }
    return;
  }
  // Two ranks whose pair is over ipc (the only pairs measured): the fused allreduce's finer mid-size chunks.
  const int only_peer = 1 - call.rank();
  const bool two_rank_allreduce = x.gather && world == 2 && call.kind() == MemoryKind::Cuda &&
                                  call.state().chunk_bytes == 0 && call.comm().same_host[only_peer] &&
                                  call.comm().uses_ipc(only_peer);
  const std::size_t chunk = two_rank_allreduce
                                ? two_rank_allreduce_chunk_elements(longest, element)
                                : chunk_elements(call.kind(), longest, element, world, call.state().chunk_bytes);
  const std::size_t chunks = ceil_div(longest, chunk);
  // pipeline_ordered: three ranks or more, and it implies staggered (shared side streams, below).
  const bool ordered = call.state().pipeline_ordered && !x.without_tokens;
  owe_ordered_tokens(call, chunks, ordered);
  Scratch& scratch = call.state().scratch;
  if (world > 1) scratch.prepare(call.kind(), call.device(), chunk * element, world - 1, call.ctx(), call.timeout());

  // Chunk k of block b: its start within the block and its length (0 past the block's end: nothing is sent, and the
  // receiver, which computes the same, posts nothing).
  auto piece = [&](int block, std::size_t k) {
    const std::size_t length = x.blocks.length[static_cast<std::size_t>(block)];
    const std::size_t begin = std::min(k * chunk, length);
    return std::pair{begin, std::min(begin + chunk, length) - begin};
  };
  auto block_at = [&](const char* base, int block, std::size_t begin) {
    return base + (x.blocks.offset[static_cast<std::size_t>(block)] + begin) * element;
  };
  auto slot_of = [&](int peer) { return peer_slot(peer, rank); };

  // Receives run kStages - 1 chunks ahead of the consumption: when this rank sends chunk k, the peers posted it long
  // ago, so no send waits a control-message round trip. Posting chunk j needs its stage free, i.e. the reduction of
  // the chunk kStages before it done (of this call or, since the stages go round across calls, of an earlier one);
  // chunk j = k + kStages - 1 is posted after chunk k + 1's copies are queued, so the host's wait for reduction
  // k - 1 overlaps the copies of chunks k and k + 1.
  const auto n = static_cast<std::size_t>(world);
  std::vector<std::vector<Request>> incoming(kStages, std::vector<Request>(n));
  auto post = [&](std::size_t j) {
    const int stage = scratch.stage_of(j);
    const std::size_t mine_length = piece(rank, j).second;
    // The stage's previous chunk must be fully read before peers may write this one into it.
    scratch.acquire(stage, call.ctx(), call.timeout());
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      incoming[static_cast<std::size_t>(stage)][static_cast<std::size_t>(peer)] =
          call.recv(peer, x.tag, scratch.slot(stage, slot_of(peer)), mine_length * element);
      if (x.gather) {
        const auto [begin, length] = piece(peer, j);
        call.stream_wait_later(call.recv(peer, x.gather_tag, const_cast<char*>(block_at(x.recv, peer, begin)),
                                         length * element));
      }
    }
  };
  if (world > 1) {
    for (std::size_t j = 0; j < std::min<std::size_t>(kStages - 1, chunks); ++j) post(j);
  }
  // Every lane's sends go to the peers in the order rank + 1, rank + 2, ...: with PICKLE_PIPELINE_SCHEDULE=staggered
  // they share one side stream per lane, and at each step every rank copies to one peer and is copied to by one
  // (the allgather's staggered schedule, allgather.cpp); in parallel each peer has side streams of its own. Shared
  // from before the handshake (in-place alltoall's ready signals), so that the sends wait where the signals were
  // awaited.
  if (call.state().pipeline_staggered) call.share_side_streams();
  if (x.before_first_send) x.before_first_send();

  // The sends run one chunk ahead of the consumption: chunk k + 1 goes out before the host waits (in post) for the
  // reduction of chunk k - 1, so that the side streams always hold a chunk's copies beyond the one in flight. Sent
  // just before that wait, chunk k + 1's copies were queued only once reduction k - 1 was done and the host had
  // woken up, while the copies of chunk k, all that was queued, took about as long; a late wake-up left the links
  // idle (two H200s: a 1 GiB allreduce 366-368 GB/s busbw against 352-355 before, docs/results/2026-11-28f). The
  // peers posted chunk k + 1 at their chunk k - 2, after their reduction of chunk k - 3, which needs only sends this
  // rank queued before, so the early send waits for nothing that waits for it.
  auto peer_at = [&](int step) { return (rank + step) % world; };
  constexpr std::size_t kSendsQueued = 2;  // chunk k and chunk k + 1
  std::vector<std::vector<Request>> outgoing(kSendsQueued, std::vector<Request>(n));
  auto send_chunk = [&](std::size_t k) {
    send_chunk_in_order(call, k, chunks, ordered, [&](int peer) {
      const auto [begin, length] = piece(peer, k);
      Request& sent = outgoing[k % kSendsQueued][static_cast<std::size_t>(peer)];
      sent = call.send(peer, x.tag, block_at(x.send, peer, begin), length * element);
      return sent;
    });
  };
  if (world > 1) send_chunk(0);
  std::vector<const void*> inputs(n);
  for (std::size_t k = 0; k < chunks; ++k) {
    const int stage = scratch.stage_of(k);
    const auto [mine_begin, mine_length] = piece(rank, k);
    if (world > 1 && k + 1 < chunks) send_chunk(k + 1);
    // The chunk is consumed once it arrived from every peer, and, where consuming it overwrites what this rank sent
    // of it, once those sends are done: copying into place (in-place alltoall: block p is what goes to p and where p's
    // block lands), and a reduce_scatter whose result goes over the start of its input (recv == send). Otherwise
    // (allreduce, whose result is this rank's own block, which no send reads) the reduction starts as soon as the
    // peers' data is in, and the stream waits for the sends by the call's end (Call::finish). Copying into place
    // writes chunk k of each peer's block, which only chunk k's sends read; a reduction's `out_chunk` is checked
    // against chunk k + 1's queued sends too (with recv == send only block 0's chunk k overlaps it, but the check
    // keeps the rule independent of where blocks start).
    char* const out_chunk = x.recv + (x.out_offset + mine_begin) * element;
    const std::size_t last_sent = std::min(k + kSendsQueued, chunks);
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      call.stream_wait(incoming[static_cast<std::size_t>(stage)][static_cast<std::size_t>(peer)]);
      for (std::size_t sent = k; sent < last_sent; ++sent) {
        const auto [begin, length] = piece(peer, sent);
        const bool overwrites_sent =
            x.consume == Exchange::Consume::CopyIntoPlace
                ? sent == k
                : overlaps(out_chunk, mine_length * element, block_at(x.send, peer, begin), length * element);
        if (overwrites_sent) call.stream_wait(outgoing[sent % kSendsQueued][static_cast<std::size_t>(peer)]);
      }
    }

    if (x.consume == Exchange::Consume::Reduce) {
      for (int j = 0; j < world; ++j) {
        inputs[static_cast<std::size_t>(j)] = j == rank ? static_cast<const void*>(block_at(x.send, rank, mine_begin))
                                                        : scratch.slot(stage, slot_of(j));
      }
      enqueue_reduce(call, x.type, x.op, out_chunk, inputs, mine_length);
    } else {
      for (int peer = 0; peer < world; ++peer) {
        if (peer == rank) continue;
        call.copy_local(const_cast<char*>(block_at(x.recv, peer, mine_begin)), scratch.slot(stage, slot_of(peer)),
                        mine_length * element);
      }
    }
    if (world == 1) continue;
    device::Event& consumed = scratch.release(stage, call.stream());

    if (x.gather && mine_length > 0) {
      // The reduced chunk goes on to every peer as soon as it is ready, while later chunks are still reduced.
      const char* result = x.recv + (x.out_offset + mine_begin) * element;
      for (int step = 1; step < world; ++step) {
        const int peer = peer_at(step);
        call.side_wait(peer, consumed, Call::kResult);
        call.send(peer, x.gather_tag, result, mine_length * element, Call::kResult);
      }
    }
    if (k + kStages - 1 < chunks) post(k + kStages - 1);
  }
  scratch.advance(chunks);
}

}  // namespace pickle::coll
