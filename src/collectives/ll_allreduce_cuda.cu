// The mailboxes' LL form (ll_allreduce.hpp): one kernel per call, of LlAllreduce::ctas CTAs, that pushes the input
// into the peers' LL cells as flagged lines, polls the peers' lines in its own GPU memory, and reduces. In each CTA
// warps 0-30 are the workers: worker t of CTA b owns lines b * 992 + t, then every ctas * 992 lines on, throughout (it
// pushes them, reduces them and stores them, so an in-place call reads each byte before it overwrites it, at any
// alignment). Warp 31 is the CTA's watcher: once its workers have pushed their lines it counts the CTA in, and the
// last CTA's watcher writes the announcement behind a system-wide fence; then, should the call go on for long (a late
// or failed peer), each watcher reads the peers' host words that a failed pair releases, so that no worker reads host
// memory while it polls.
// No CTA waits for another CTA of its own rank (the lines of any CTA of a peer may be polled by any CTA here), so
// the ranks may run different numbers of CTAs (PICKLE_REDUCE_CTAS need not agree) as long as every CTA of each runs
// at once: where fewer fit (other kernels on the SMs, an MPS limit, green contexts), CTA b needs the peer's CTA b,
// which equal grids dispatched in order provide, but unequal ones can leave each rank's running CTAs waiting for lines
// of the other's waiting ones (as the loads form, such GPUs want PICKLE_ALLREDUCE_LL_MAX=16384, one CTA, or 0).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include <pickle/error.hpp>

#include "collectives/gate_device.cuh"
#include "collectives/launch_device.cuh"
#include "collectives/ll_lines.cuh"
#include "collectives/ll_allreduce.hpp"
#include "device/cuda/kernel_launch.hpp"

namespace pickle::coll {
namespace {

constexpr int kThreads = 1024;
constexpr int kWorkers = kThreads - 32;  ///< warps 0-30; warp 31 watches
/// The named barrier (0 is __syncthreads') at which the workers report their lines pushed and the watcher waits.
constexpr int kPushedBarrier = 1;
static_assert(kLlCtaBytes / kLlLineData <= 4 * kWorkers, "a CTA's share is a few lines per worker");

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

/// A released host word is this far ahead of the count it was released at (Communicator::Impl::fail_peer_locked:
/// 2^30); the peer's own raises never are. Half of it tells the two apart.
constexpr std::uint32_t kReleasedAhead = 1u << 29;

/// The data of line `line` of a peer's cell, once both its flags are `flag`, or as the line stands once the
/// watcher has seen the pair with that peer released (`released`: the reduction is then garbage, and the call's end
/// check reports the failure).
__device__ uint2 await_line(const void* cell, std::size_t line, std::uint32_t flag, const volatile int& released) {
  for (;;) {
    const uint4 v = load_flagged(cell, line);
    if ((v.y == flag && v.w == flag) || released != 0) return make_uint2(v.x, v.z);
  }
}

/// The GPU's global nanosecond timer (PTX %globaltimer).
__device__ unsigned long long global_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

/// The watcher's work (one thread per CTA, after the barrier at which every worker of its CTA reported its lines
/// pushed): the announcement, once every CTA's lines are out, behind a system-wide fence, so that a peer host that
/// sees the filled count sees the lines too (a pair that fails after the count went out takes the call's data as
/// delivered); then, until every worker of its CTA is done, when ReleaseReads says so (not in the call's first 50 us),
/// each peer's host word that a failed pair releases (kReleasedAhead), into `released`.
__device__ void watch(const LlAllreduce& call, const ReduceGate& gate, volatile int* released,
                      const volatile int& workers_done) {
  gated::count_in_and_announce(gate);  // after the barrier: this CTA's lines are issued
  ReleaseReads reads(global_ns());
  for (unsigned turn = 1; workers_done < kWorkers; ++turn) {
    if (reads.due(global_ns(), turn)) {
      for (int r = 0; r < call.nranks; ++r) {
        if (r != call.rank && released[r] == 0 &&
            gated::reached(gated::load_volatile(call.release[r]), call.filled_count + kReleasedAhead)) {
          released[r] = 1;
        }
      }
    }
    __nanosleep(100);  // the CTA ends when this sees the workers done
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
  const std::size_t lines = ll_lines(bytes);

  __shared__ int released[kMaxLlRanks];  // by the watcher, per peer: its pair was released
  __shared__ int workers_done;
  if (threadIdx.x < kMaxLlRanks) released[threadIdx.x] = 0;
  if (threadIdx.x == 0) workers_done = 0;
  __syncthreads();
  // Barrier kPushedBarrier: non-aligned (every thread counts), the workers arrive without waiting, the watcher warp
  // waits for them.
  if (threadIdx.x >= kWorkers) {
    asm volatile("barrier.sync %0, %1;" ::"r"(kPushedBarrier), "r"(kThreads) : "memory");
    if (threadIdx.x == kWorkers) watch(call, gate, released, workers_done);
  } else {
    // Lines past the data (call.push_lines, a cell's refresh) carry the flag and zeros.
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * kWorkers + threadIdx.x;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kWorkers;
    for (std::size_t line = first; line < call.push_lines; line += stride) {
      const uint2 data = load_line(send, bytes, line);
      for (int r = 0; r < call.nranks; ++r) {
        if (r != call.rank) store_flagged(call.push_to[r], line, data, call.flag);
      }
    }
    asm volatile("barrier.arrive %0, %1;" ::"r"(kPushedBarrier), "r"(kThreads) : "memory");
    for (std::size_t line = first; line < lines; line += stride) {
      // In rank order, as every other form reduces: every rank's result is the same bits.
      A acc[kPerLine];
      for (int r = 0; r < call.nranks; ++r) {
        Line<S> in;
        in.raw =
            r == call.rank ? load_line(send, bytes, line) : await_line(call.pull_from[r], line, call.flag, released[r]);
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
    atomicAdd(&workers_done, 1);
  }
  gated::raise(gate);
}

/// The LL kernel's instance of an element type and operator (load_kernels, resident_ctas).
constexpr auto ll_kernel_of = [](auto element, auto which) {
  return reinterpret_cast<const void*>(&ll_allreduce_kernel<decltype(element), decltype(which)::value>);
};

}  // namespace

void load_ll_allreduce_kernels(int device) {
  load_kernels(device, "LL allreduce kernel", ll_kernel_of);
  resident_ctas(device, ll_kernel_of, kThreads);  // now rather than at the first launch
}

void launch_ll_allreduce_cuda(const LlAllreduce& call, void* cuda_stream, int device, const ReduceGate& gate) {
  const std::size_t bytes = call.count * datatype_size(call.type);
  if (call.nranks < 1 || call.nranks > kMaxLlRanks || call.rank < 0 || call.rank >= call.nranks ||
      bytes > kLlMaxBytes || call.push_lines < ll_lines(bytes) || call.push_lines > ll_lines(kLlMaxBytes) ||
      call.ctas < 1 || call.ctas > kMaxGatedCtas || !gated::gate_fits(gate) ||
      (call.ctas > 1 && gate.announces > 0 && gate.ctas_published == nullptr)) {
    throw Error(ErrorCode::Internal,
                "LL allreduce: " + std::to_string(call.nranks) + " ranks (at most " + std::to_string(kMaxLlRanks) +
                    "), rank " + std::to_string(call.rank) + ", " + std::to_string(bytes) + " bytes (at most " +
                    std::to_string(kLlMaxBytes) + ") in " + std::to_string(call.push_lines) + " lines on " +
                    std::to_string(call.ctas) + " CTAs (at most " + std::to_string(kMaxGatedCtas) +
                    "), or a gate with too many pre-waits, raises or announcements, or raises or (on more than one "
                    "CTA) announcements without a CTA count");
  }
  LaunchDevice current(device);
  // Every CTA must run at once (a CTA that polls holds its SM until the peers' lines come; resident_ctas).
  const int resident = resident_ctas(device, ll_kernel_of, kThreads);
  const int ctas = resident > 0 ? std::min(call.ctas, resident) : call.ctas;
  cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream);
  cudaError_t status = cudaSuccess;
  dispatch_type(call.type, [&](auto element) {
    dispatch_op(call.op, [&](auto which) {
      LlAllreduce call_argument = call;
      ReduceGate gate_argument = gate;
      void* args[] = {&call_argument, &gate_argument};
      status = device::cuda::launch_kernel(
          reinterpret_cast<const void*>(&ll_allreduce_kernel<decltype(element), decltype(which)::value>), ctas,
          kThreads, stream, args);
    });
  });
  if (status != cudaSuccess) {
    throw_launch_error(status, std::string("LL allreduce kernel launch (") + datatype_name(call.type) + " " +
                                   reduce_op_name(call.op) + ", " + std::to_string(call.count) + " elements, " +
                                   std::to_string(call.nranks) + " ranks, " + std::to_string(ctas) + " CTAs)");
  }
}

}  // namespace pickle::coll
