// The mailboxes' LL form (ll_allreduce.hpp): one kernel per call that pushes the input into the peers' LL cells as
// flagged lines, polls the peers' lines in its own GPU memory, and reduces. Thread t owns lines t, t + threads, ...
// throughout: it pushes them, reduces them and stores them, so an in-place call reads each byte before it
// overwrites it, at any alignment.
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
/// Lines per thread before another CTA is taken: one, so that the stores into the peers spread over as many SMs as
/// the budget allows (a few CTAs issue remote stores slowly: on two H200s 4 lines per thread made 64 KiB calls
/// slower than the loads form, docs/results/2026-11-30f-h200x2.md).
constexpr std::size_t kLinesPerThread = 1;

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

/// The data of line `line` of a peer's cell, once both its flags are `flag`. Every 64th poll also reads the peer's
/// filled host word: the peer's kernel writes it at its end (its lines long out, behind a system-wide fence), and a
/// failed pair releases it; either way the poll ends with the line as it then stands.
__device__ uint2 await_line(const void* cell, std::size_t line, std::uint32_t flag, const std::uint32_t* release) {
  for (unsigned poll = 1;; ++poll) {
    uint4 v = load_flagged(cell, line);
    if (v.y == flag && v.w == flag) return make_uint2(v.x, v.z);
    if (poll % 64 == 0 && gated::reached(gated::load_volatile(release), flag)) {
      __threadfence_system();  // the line is read after the word
      v = load_flagged(cell, line);
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
  // No announcement here: the peers poll the lines, not the filled words, which go out with the emptied ones at the
  // end (raises), off every thread's path to its polls.
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
  LaunchDevice current(device);
  for (DataType type : kReduceTypes) {
    for (ReduceOp op : kReduceOps) {
      dispatch_type(type, [&](auto element) {
        dispatch_op(op, [&](auto which) {
          cudaFuncAttributes attributes{};
          const cudaError_t status = cudaFuncGetAttributes(
              &attributes,
              reinterpret_cast<const void*>(&ll_allreduce_kernel<decltype(element), decltype(which)::value>));
          if (status != cudaSuccess) {
            cudaGetLastError();
            throw CudaError(std::string("loading the LL allreduce kernel (") + datatype_name(type) + " " +
                                reduce_op_name(op) + ") on device " + std::to_string(device) + ": " +
                                cudaGetErrorName(status) + ": " + cudaGetErrorString(status),
                            static_cast<int>(status));
          }
        });
      });
    }
  }
}

void launch_ll_allreduce_cuda(const LlAllreduce& call, void* cuda_stream, int device, int max_ctas,
                              const ReduceGate& gate) {
  if (call.nranks < 1 || call.nranks > kMaxLlRanks || call.rank < 0 || call.rank >= call.nranks ||
      gate.pre_waits.count > kMaxGatePeers || gate.raises > 4 * kMaxGatePeers || gate.announces > 0 ||
      (gate.raises > 0 && gate.ctas_done == nullptr)) {
    throw Error(ErrorCode::Internal, "LL allreduce: " + std::to_string(call.nranks) + " ranks (at most " +
                                         std::to_string(kMaxLlRanks) + "), rank " + std::to_string(call.rank) +
                                         ", or a gate with too many pre-waits or raises, with announcements, or "
                                         "without a CTA count");
  }
  const std::size_t lines = (call.count * datatype_size(call.type) + kLlLineData - 1) / kLlLineData;
  const std::size_t per_cta = static_cast<std::size_t>(kThreads) * kLinesPerThread;
  const int ctas = static_cast<int>(
      std::clamp<std::size_t>((lines + per_cta - 1) / per_cta, 1, static_cast<std::size_t>(std::max(1, max_ctas))));
  LaunchDevice current(device);
  cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream);
  cudaError_t status = cudaSuccess;
  dispatch_type(call.type, [&](auto element) {
    dispatch_op(call.op, [&](auto which) {
      ll_allreduce_kernel<decltype(element), decltype(which)::value><<<ctas, kThreads, 0, stream>>>(call, gate);
      status = cudaGetLastError();
    });
  });
  if (status != cudaSuccess) {
    throw CudaError(std::string("LL allreduce kernel launch (") + datatype_name(call.type) + " " +
                        reduce_op_name(call.op) + ", " + std::to_string(call.count) + " elements, " +
                        std::to_string(call.nranks) + " ranks): " + cudaGetErrorName(status) + ": " +
                        cudaGetErrorString(status),
                    static_cast<int>(status));
  }
}

}  // namespace pickle::coll
