#pragma once
// The chunked exchange behind reduce_scatter, allreduce and in-place alltoall: every rank sends block p of its input
// to rank p and receives its own block from every peer into scratch, chunk by chunk, then consumes each chunk on the
// caller's stream (a reduction, or copies into place) while the copies of the next chunks are in flight.

#include <cstddef>
#include <functional>
#include <vector>

#include <pickle/collectives.hpp>

#include "collectives/plumbing.hpp"
#include "collectives/reduce.hpp"

namespace pickle::coll {

struct ReduceGate;

struct Exchange {
  enum class Consume {
    Reduce,         ///< reduce_scatter / allreduce: reduce the chunk's inputs (in rank order) into `out`
    CopyIntoPlace,  ///< in-place alltoall: copy peer p's chunk to block p of `recv`
  };
  Consume consume = Consume::Reduce;
  int tag = 0;
  /// When set (allreduce), each reduced chunk goes on to every peer (tag `gather_tag`), which receives it at the
  /// same offset of its `recv`; and this rank receives the peers' reduced chunks into their blocks of `recv`.
  bool gather = false;
  int gather_tag = 0;
  DataType type = DataType::F32;
  ReduceOp op = ReduceOp::Sum;
  const char* send = nullptr;  ///< block p (offsets and lengths below, in elements) goes to rank p
  char* recv = nullptr;
  Blocks blocks;
  /// Reduce: where this rank's result starts in `recv` (elements); its length is that of this rank's block.
  std::size_t out_offset = 0;
  /// When set, runs once the first chunks' receives are posted and before the first send (in-place alltoall's ready
  /// handshake, which waits for the peers' first posts).
  std::function<void()> before_first_send;
  /// Sends without the ordered schedule's tokens even where PICKLE_PIPELINE_SCHEDULE=ordered (then in the staggered
  /// order alone): the one-shot allreduce, whose small copies gain less from the order than its two stream
  /// operations per step cost (four H200s: 57-71 against 68-86 us per call up to 1 MiB, docs/collectives.md).
  /// Every rank must set it alike (the token counts must match).
  bool without_tokens = false;
};

/// UnavailableError naming the call when a reduction of `world` inputs cannot run on `kind` memory (the CUDA kernel
/// takes at most kMaxReduceInputs). run_exchange checks it before it posts anything, so that the failure leaves the
/// ranks in step and the communicator usable.
void check_reduction_fits(const OpContext& ctx, MemoryKind kind, int world);

/// Sends chunk k (of `chunks`, the same on every rank) to every peer, rank + 1 first: `send(peer)` makes the send and
/// returns its Request (empty for nothing). When `ordered` (PICKLE_PIPELINE_SCHEDULE=ordered with three ranks or
/// more: CollectiveState::pipeline_ordered, unless the exchange goes without tokens), each send's stream first waits
/// for the token of the rank that copies into the same peer just before it, and raises the token of the rank that
/// copies into it next. Every rank must call it for every chunk of the call, in order, with the same `ordered`.
void send_chunk_in_order(Call& call, std::size_t k, std::size_t chunks, bool ordered,
                         const std::function<Request(int)>& send);
/// Tells `call` the tokens send_chunk_in_order will raise over a call of `chunks` chunks (none unless `ordered`), so
/// that a call failing partway raises the rest (Call::abandon). Before anything of the call that can fail.
void owe_ordered_tokens(Call& call, std::size_t chunks, bool ordered);

/// Enqueues out = reduce(inputs) (`count` elements, inputs in the order given) on the call's stream: a kernel on at
/// most PICKLE_REDUCE_CTAS CTAs for CUDA memory, a host callback (so that it runs in stream order) for host memory.
/// The inputs must fit one reduction (check_reduction_fits).
void enqueue_reduce(Call& call, DataType type, ReduceOp op, void* out, const std::vector<const void*>& inputs,
                    std::size_t count);
/// The CTAs a gated kernel (the mailboxes' loads and LL forms) may take: it holds them while it waits for the peers,
/// so at most kMaxGatedCtas, whatever PICKLE_REDUCE_CTAS allows (a mailbox cell is at most 4 MiB; by default
/// PICKLE_REDUCE_CTAS's 8).
int gated_cta_budget(const Call& call);
/// enqueue_reduce on CUDA memory, gated: the kernel waits for `gate`'s words before reading the inputs and raises its
/// words once it has read them (ReduceGate, reduce.hpp); runs with `count` 0 too. CUDA memory only.
/// `max_ctas` lowers the CTA budget further (the loads form's in-place calls at unaligned addresses run on one CTA).
void enqueue_gated_reduce(Call& call, DataType type, ReduceOp op, void* out, const std::vector<const void*>& inputs,
                          std::size_t count, const ReduceGate& gate, int max_ctas = kMaxGatedCtas);

/// Runs the exchange as part of `call` (the caller then calls call.finish()).
void run_exchange(Call& call, const Exchange& exchange);

}  // namespace pickle::coll
