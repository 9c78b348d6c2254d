// The mailboxes' LL form (ll_allreduce.hpp): one kernel of one CTA per call that pushes the input into the peers' LL
// cells as flagged lines, polls the peers' lines in its own GPU memory, and reduces. Thread t owns lines t,
// t + threads, ... throughout: it pushes them, reduces them and stores them, so an in-place call reads each byte before
// it overwrites it, at any alignment.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include <pickle/error.hpp>

#include "collectives/gate_device.cuh"
#include "collectives/launch_device.cuh"
#include "collectives/ll_allreduce.hpp"

namespace pickle::coll {
namespace {

constexpr int kThreads = 1024;
static_assert(kLlMaxBytes == kThreads * kLlLinesPerThread * kLlLineData, "one CTA carries the largest LL call");

/// Line `line` of `bytes` at `from`: one 8-byte load where the line is whole and aligned, else byte by byte with
/// the bytes past the end zero (they are reduced, never stored).
__device__ uint2 load_line(const unsigned char* from, std::size_t bytes, std::size_t line) {
  const std::size_t at = line * kLlLineData;
  if (at + kLlLineData <= bytes && (reinterpret_cast<std::uintptr_t>(from + at) & 7u) == 0) {
    return *reinterpret_cast<const uint2*>(from + at);
  }
  union {
    uint2 v;
    unsigned char b[kLlLineData];
  } u;
  u.v = make_uint2(0, 0);
  for (std::size_t k = 0; k < kLlLineData && at + k < bytes; ++k) u.b[k] = from[at + k];
  return u.v;
}

/// The counterpart of load_line: only the bytes that lie within `bytes`.
__device__ void store_line(unsigned char* to, std::size_t bytes, std::size_t line, uint2 value) {
  const std::size_t at = line * kLlLineData;
  if (at + kLlLineData <= bytes && (reinterpret_cast<std::uintptr_t>(to + at) & 7u) == 0) {
    *reinterpret_cast<uint2*>(to + at) = value;
    return;
  }
  union {
    uint2 v;
    unsigned char b[kLlLineData];
  } u;
  u.v = value;
  for (std::size_t k = 0; k < kLlLineData && at + k < bytes; ++k) to[at + k] = u.b[k];
}

/// One 16-byte store of a flagged line, volatile so that it goes out now rather than sit in a cache (NCCL's LL
/// stores the same way).
__device__ void store_flagged(void* cell, std::size_t line, uint2 data, std::uint32_t flag) {
  uint4* at = static_cast<uint4*>(cell) + line;
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(data.x), "r"(flag), "r"(data.y),
               "r"(flag)
               : "memory");
}

__device__ uint4 load_flagged(const void* cell, std::size_t line) {
  const uint4* at = static_cast<const uint4*>(cell) + line;
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at)
               : "memory");
  return v;
}

/// A released host word is this far ahead of the count it was released at (Communicator::Impl::fail_peer_locked:
/// 2^30); the peer's own raises never are. Half of it tells the two apart.
constexpr std::uint32_t kReleasedAhead = 1u << 29;

/// The data of line `line` of a peer's cell, once both its flags are `flag`. Every 64th poll also reads the peer's
/// filled host word, which a failed pair releases: then the poll ends with the line as it stands (the reduction is
/// garbage, and the call's end check reports the failure). The peer's own announcement in that word does not end
/// it: nothing orders the announcement after the peer's lines.
__device__ uint2 await_line(const void* cell, std::size_t line, std::uint32_t flag, const std::uint32_t* release) {
  for (unsigned poll = 1;; ++poll) {
    const uint4 v = load_flagged(cell, line);
    if (v.y == flag && v.w == flag) return make_uint2(v.x, v.z);
    if (poll % 64 == 0 && gated::reached(gated::load_volatile(release), flag + kReleasedAhead)) {
      return make_uint2(v.x, v.z);
    }
  }
}

template <class S>
union Line {
  uint2 raw;
  S element[kLlLineData / sizeof(S)];
};

template <class E, ReduceOp Op>
__global__ void __launch_bounds__(kThreads) ll_allreduce_kernel(LlAllreduce call, ReduceGate gate) {
  if (gate.pre_waits.count > 0) gated::await_words(gate.pre_waits);
  using S = typename E::Storage;
  using A = typename E::Acc;
  constexpr int kPerLine = static_cast<int>(kLlLineData / sizeof(S));
  const auto* send = static_cast<const unsigned char*>(call.send);
  auto* recv = static_cast<unsigned char*>(call.recv);
  const std::size_t bytes = call.count * sizeof(S);
  const std::size_t lines = (bytes + kLlLineData - 1) / kLlLineData;
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;

  for (std::size_t line = thread; line < lines; line += threads) {
    const uint2 data = load_line(send, bytes, line);
    for (int r = 0; r < call.nranks; ++r) {
      if (r != call.rank) store_flagged(call.push_to[r], line, data, call.flag);
    }
  }
  // The announcement (the peers' filled words) right after the lines, without a fence: the peers' kernels poll the
  // lines, not these words, which their hosts' watch reads (it times a stalled wait only once this rank's stream
  // has got there) and which later calls of the other forms count on. One thread, no barrier: the others go on to
  // their polls.
  if (threadIdx.x == 0) {
    for (int i = 0; i < gate.announces; ++i) {
      *reinterpret_cast<volatile std::uint32_t*>(gate.announce_word[i]) = gate.announce_value;
    }
  }
  for (std::size_t line = thread; line < lines; line += threads) {
    // In rank order, as every other form reduces: every rank's result is the same bits.
    A acc[kPerLine];
    for (int r = 0; r < call.nranks; ++r) {
      Line<S> in;
      in.raw = r == call.rank ? load_line(send, bytes, line)
                              : await_line(call.pull_from[r], line, call.flag, call.release[r]);
#pragma unroll
      for (int e = 0; e < kPerLine; ++e) {
        acc[e] = r == 0 ? E::load(in.element[e]) : combine<Op>(acc[e], E::load(in.element[e]));
      }
    }
    Line<S> out;
#pragma unroll
    for (int e = 0; e < kPerLine; ++e) out.element[e] = E::store(finish<Op>(acc[e], call.nranks));
    store_line(recv, bytes, line, out.raw);
  }
  gated::raise(gate);
}

}  // namespace

void load_ll_allreduce_kernels(int device) {
  load_kernels(device, "LL allreduce kernel", [](auto element, auto which) {
    return reinterpret_cast<const void*>(&ll_allreduce_kernel<decltype(element), decltype(which)::value>);
  });
}

void launch_ll_allreduce_cuda(const LlAllreduce& call, void* cuda_stream, int device, const ReduceGate& gate) {
  const std::size_t bytes = call.count * datatype_size(call.type);
  if (call.nranks < 1 || call.nranks > kMaxLlRanks || call.rank < 0 || call.rank >= call.nranks ||
      bytes > kLlMaxBytes || gate.pre_waits.count > kMaxGatePeers || gate.raises > 2 * kMaxGatePeers ||
      gate.announces > 2 * kMaxGatePeers || (gate.raises > 0 && gate.ctas_done == nullptr)) {
    throw Error(ErrorCode::Internal, "LL allreduce: " + std::to_string(call.nranks) + " ranks (at most " +
                                         std::to_string(kMaxLlRanks) + "), rank " + std::to_string(call.rank) + ", " +
                                         std::to_string(bytes) + " bytes (at most " + std::to_string(kLlMaxBytes) +
                                         "), or a gate with too many pre-waits, raises or announcements, or raises "
                                         "without a CTA count");
  }
  LaunchDevice current(device);
  cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream);
  cudaError_t status = cudaSuccess;
  dispatch_type(call.type, [&](auto element) {
    dispatch_op(call.op, [&](auto which) {
      ll_allreduce_kernel<decltype(element), decltype(which)::value><<<1, kThreads, 0, stream>>>(call, gate);
      status = cudaGetLastError();
    });
  });
  if (status != cudaSuccess) {
    throw_launch_error(status, std::string("LL allreduce kernel launch (") + datatype_name(call.type) + " " +
                                   reduce_op_name(call.op) + ", " + std::to_string(call.count) + " elements, " +
                                   std::to_string(call.nranks) + " ranks)");
  }
}

}  // namespace pickle::coll
