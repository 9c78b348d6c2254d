// The reduction kernel of reduce_scatter and allreduce: out[i] = op(in[0][i], ..., in[k-1][i]) on a small, bounded
// number of CTAs (PICKLE_REDUCE_CTAS), so that the SMs stay with the application while copy engines move the data.
// A few CTAs can still read at a large fraction of HBM bandwidth if each thread keeps many bytes in flight: every
// thread issues the loads of several 16-byte vectors of several inputs before it combines any of them (one or two
// inputs: reduce_one_or_two; more: reduce_accumulating and reduce_accumulating_pairs), and the loads are streaming
// (evict-first: every byte is read once, and the L2 is better left to the application and the copy engines).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include <pickle/error.hpp>

#include "collectives/gate_device.cuh"
#include "collectives/launch_device.cuh"
#include "collectives/reduce.hpp"
#include "device/cuda/kernel_launch.hpp"

namespace pickle::coll {
namespace {

/// 1024 threads per CTA rather than 512 with twice the vectors each: the same bytes in flight per SM, but twice the
/// warps to cover each other's combine-and-store phases (one H100, 8 CTAs: bf16 +15%, 8 inputs +23-29%, f32 equal;
/// tools/probes/reduce_probe, docs/results/2026-11-24-h100x1.md).
constexpr int kThreads = 1024;

/// 16-byte vectors each thread keeps in flight per input: about 16 accumulators per thread (registers stay under the
/// 64 that 1024-thread CTAs allow), which for float means 64 bytes per input in flight per thread.
template <class S>
__host__ __device__ constexpr int unroll_of() {
  constexpr int per_vector = static_cast<int>(sizeof(uint4) / sizeof(S));
  // 8-byte types: 2 vectors (4 accumulators of 2 registers each, plus 64-bit address math).
  constexpr int unroll = per_vector <= 2 ? 2 : 16 / per_vector;
  return unroll < 1 ? 1 : (unroll > 8 ? 8 : unroll);
}

/// Inputs whose loads a thread issues together in the accumulating path (three inputs or more): as many as the
/// registers the accumulators leave hold, about 32 of them for loads (unroll_of's vectors of each input): 2 for
/// 4-byte types, 4 for the others (u8's 8 made ptxas spill). With 2 at a time for every type, 2-byte types had half
/// of float's bytes in flight. One H200, 8 CTAs, bf16 (2026-12-01b): 3 inputs 168 -> 240 GB/s of output, 5 inputs
/// 113 -> 130, 8 inputs 83 -> 103; float 257-259, 186 and 138 either way.
template <class S>
__host__ __device__ constexpr int inputs_per_batch() {
  constexpr int batch = 8 / unroll_of<S>();
  return batch < 2 ? 2 : (batch > 4 ? 4 : batch);
}

/// Vectors per input each thread keeps in flight when one or two inputs are reduced (every reduction of two ranks):
/// nothing accumulates across inputs there, so each element is combined and rounded as soon as both inputs are
/// loaded, and the registers that held the accumulators hold loads instead: 64 bytes per input per thread for every
/// type, which the accumulating path below keeps only for 4-byte types (2-byte types had 32, so bf16 reduced at 3/4
/// of float's bytes per second: tools/probes/reduce_probe).
constexpr int kPairUnroll = 4;

struct KernelInputs {
  const void* ptr[kMaxReduceInputs];
};

template <class S>
union Vector {
  uint4 raw;
  S element[sizeof(uint4) / sizeof(S)];
};

using gated::aligned16;

/// ReduceGate's publication: this rank's input into each destination (its own cell, or the peers' cells), by every
/// CTA, then (once all have, behind a system-wide fence) the announcements by the last CTA. The announcement thus
/// needs every CTA of the kernel to get an SM while the first ones wait for the peers' announcements: with fewer SMs
/// free to the process than CTAs (an MPS thread limit, green contexts) two ranks could wait for each other's missing
/// CTAs (docs/collectives.md, "Mailboxes": PICKLE_ALLREDUCE_LOADS_MAX=0 there). Vector i is copied by the thread
/// that reduces it, so an in-place call reads its element before it overwrites it; the byte-wise copy of unaligned
/// inputs is not (mailbox.cpp runs those in-place calls on one CTA). Each vector is loaded once and stored to every
/// destination: pushed to several peers, the stores over NVLink go out together.
__device__ void publish(const ReduceGate& gate) {
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto* from = static_cast<const unsigned char*>(gate.publish_from);
  bool vectorized = aligned16(from);
  for (int d = 0; d < gate.publishes; ++d) vectorized = vectorized && aligned16(gate.publish_to[d]);
  std::size_t tail = 0;
  if (vectorized) {
    const std::size_t vectors = gate.publish_bytes / sizeof(uint4);
    // Four vectors' loads in flight before their stores (which the compiler may not move above a later load: the
    // destinations could alias the source, for all it knows); vector i stays with thread i % threads.
    constexpr int kBatch = 4;
    for (std::size_t base = thread; base < vectors; base += threads * kBatch) {
      uint4 vector[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const std::size_t i = base + static_cast<std::size_t>(u) * threads;
        if (i < vectors) vector[u] = __ldcs(reinterpret_cast<const uint4*>(from) + i);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const std::size_t i = base + static_cast<std::size_t>(u) * threads;
        if (i >= vectors) continue;
        for (int d = 0; d < gate.publishes; ++d) reinterpret_cast<uint4*>(gate.publish_to[d])[i] = vector[u];
      }
    }
    tail = vectors * sizeof(uint4);
  }
  for (std::size_t i = tail + thread; i < gate.publish_bytes; i += threads) {
    const unsigned char byte = from[i];
    for (int d = 0; d < gate.publishes; ++d) static_cast<unsigned char*>(gate.publish_to[d])[i] = byte;
  }
  gated::announce(gate);
}

/// out = op(in[0], in[1]) (or op of in[0] alone), vector by vector, kPairUnroll vectors of each input in flight per
/// thread. The result is the accumulating path's exactly: both widen, combine once and round once. Each path writes
/// its load loop out rather than sharing one: a shared helper (a null pointer for no second input) made ptxas spill
/// the accumulating path of the 4-byte types (sm_90, 2026-12-01).
template <class E, ReduceOp Op>
__device__ void reduce_one_or_two(const KernelInputs& in, bool pair, typename E::Storage* out, std::size_t vectors,
                                  int nranks, std::size_t thread, std::size_t threads) {
  using S = typename E::Storage;
  constexpr int kPerVector = static_cast<int>(sizeof(uint4) / sizeof(S));
  for (std::size_t base = thread; base < vectors; base += threads * kPairUnroll) {
    Vector<S> v[kPairUnroll], w[kPairUnroll];
#pragma unroll
    for (int u = 0; u < kPairUnroll; ++u) {  // lanes past the end stay defined
      v[u].raw = make_uint4(0, 0, 0, 0);
      w[u].raw = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kPairUnroll; ++u) {
      const std::size_t index = base + static_cast<std::size_t>(u) * threads;
      if (index < vectors) {
        v[u].raw = __ldcs(static_cast<const uint4*>(in.ptr[0]) + index);
        if (pair) w[u].raw = __ldcs(static_cast<const uint4*>(in.ptr[1]) + index);
      }
    }
#pragma unroll
    for (int u = 0; u < kPairUnroll; ++u) {
      const std::size_t index = base + static_cast<std::size_t>(u) * threads;
      if (index >= vectors) continue;
#pragma unroll
      for (int e = 0; e < kPerVector; ++e) {
        const auto first = E::load(v[u].element[e]);
        const auto both = pair ? combine<Op>(first, E::load(w[u].element[e])) : first;
        v[u].element[e] = E::store(finish<Op>(both, nranks));
      }
      __stcs(reinterpret_cast<uint4*>(out) + index, v[u].raw);
    }
  }
}

/// out = op(in[0], ..., in[ninputs - 1]) for three inputs or more, for types that load more than two inputs at a
/// time (inputs_per_batch): per pass each thread accumulates unroll_of's vectors, widened, loading inputs_per_batch
/// of the inputs at a time (all their loads in flight before any is used) and combining them into the accumulators
/// in input order; it rounds once at the end.
template <class E, ReduceOp Op>
__device__ void reduce_accumulating(const KernelInputs& in, int ninputs, typename E::Storage* out, std::size_t vectors,
                                    int nranks, std::size_t thread, std::size_t threads) {
  using S = typename E::Storage;
  using A = typename E::Acc;
  constexpr int kPerVector = static_cast<int>(sizeof(uint4) / sizeof(S));
  constexpr int kUnroll = unroll_of<S>();
  constexpr int kBatch = inputs_per_batch<S>();
  __builtin_assume(ninputs > 2);  // the first batch's first three inputs exist
  for (std::size_t base = thread; base < vectors; base += threads * kUnroll) {
    A acc[kUnroll][kPerVector];
    Vector<S> v[kBatch][kUnroll];
    // Inputs first .. first + kBatch - 1 (those that exist; `first` does, as the callers' loops say); lanes past the
    // end and absent inputs hold zeros.
    const auto load_batch = [&](int first) {
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const std::size_t index = base + static_cast<std::size_t>(u) * threads;
          if ((k == 0 || first + k < ninputs) && index < vectors) {
            v[k][u].raw = __ldcs(static_cast<const uint4*>(in.ptr[first + k]) + index);
          } else {
            v[k][u].raw = make_uint4(0, 0, 0, 0);
          }
        }
      }
    };
    // Combines batch inputs k_begin .. of the batch starting at `first` into the accumulators.
    const auto combine_batch = [&](int first, int k_begin) {
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (k < k_begin || first + k >= ninputs) continue;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
          for (int e = 0; e < kPerVector; ++e) acc[u][e] = combine<Op>(acc[u][e], E::load(v[k][u].element[e]));
        }
      }
    };
    load_batch(0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < kPerVector; ++e) acc[u][e] = E::load(v[0][u].element[e]);
    }
    combine_batch(0, 1);
    for (int first = kBatch; first < ninputs; first += kBatch) {
      load_batch(first);
      combine_batch(first, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t index = base + static_cast<std::size_t>(u) * threads;
      if (index >= vectors) continue;
#pragma unroll
      for (int e = 0; e < kPerVector; ++e) v[0][u].element[e] = E::store(finish<Op>(acc[u][e], nranks));
      __stcs(reinterpret_cast<uint4*>(out) + index, v[0][u].raw);
    }
  }
}

/// The same for 4-byte types, two inputs at a time: reduce_accumulating with batches of two was 1-2% slower for float
/// at 5 and 8 inputs (one H200, 2026-12-01b), so they keep this loop, the one every type took until then.
template <class E, ReduceOp Op>
__device__ void reduce_accumulating_pairs(const KernelInputs& in, int ninputs, typename E::Storage* out,
                                          std::size_t vectors, int nranks, std::size_t thread, std::size_t threads) {
  using S = typename E::Storage;
  using A = typename E::Acc;
  constexpr int kPerVector = static_cast<int>(sizeof(uint4) / sizeof(S));
  constexpr int kUnroll = unroll_of<S>();
  for (std::size_t base = thread; base < vectors; base += threads * kUnroll) {
    A acc[kUnroll][kPerVector];
    Vector<S> v[kUnroll], w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // lanes past the end stay defined
      v[u].raw = make_uint4(0, 0, 0, 0);
      w[u].raw = make_uint4(0, 0, 0, 0);
    }
    // Three inputs or more. Inputs two at a time: both inputs' loads are in flight together, twice the bytes per
    // thread that one input's would keep, which is what a few CTAs need to read near HBM speed
    // (tools/probes/reduce_probe).
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t index = base + static_cast<std::size_t>(u) * threads;
      if (index < vectors) {
        v[u].raw = __ldcs(static_cast<const uint4*>(in.ptr[0]) + index);
        w[u].raw = __ldcs(static_cast<const uint4*>(in.ptr[1]) + index);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < kPerVector; ++e) {
        acc[u][e] = combine<Op>(E::load(v[u].element[e]), E::load(w[u].element[e]));
      }
    }
    for (int j = 2; j < ninputs; j += 2) {
      const bool second = j + 1 < ninputs;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const std::size_t index = base + static_cast<std::size_t>(u) * threads;
        if (index < vectors) {
          v[u].raw = __ldcs(static_cast<const uint4*>(in.ptr[j]) + index);
          if (second) w[u].raw = __ldcs(static_cast<const uint4*>(in.ptr[j + 1]) + index);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int e = 0; e < kPerVector; ++e) {
          acc[u][e] = combine<Op>(acc[u][e], E::load(v[u].element[e]));
          if (second) acc[u][e] = combine<Op>(acc[u][e], E::load(w[u].element[e]));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t index = base + static_cast<std::size_t>(u) * threads;
      if (index >= vectors) continue;
#pragma unroll
      for (int e = 0; e < kPerVector; ++e) v[u].element[e] = E::store(finish<Op>(acc[u][e], nranks));
      __stcs(reinterpret_cast<uint4*>(out) + index, v[u].raw);
    }
  }
}

template <class E, ReduceOp Op>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(KernelInputs in, int ninputs, void* out_raw, std::size_t count, int nranks, bool vectorized,
                  ReduceGate gate) {
  if (gate.pre_waits.count > 0) gated::await_words(gate.pre_waits);
  if (gate.publishes > 0 || gate.announces > 0) publish(gate);
  if (gate.waits.count > 0) gated::await_words(gate.waits);
  using S = typename E::Storage;
  using A = typename E::Acc;
  constexpr int kPerVector = static_cast<int>(sizeof(uint4) / sizeof(S));
  S* out = static_cast<S*>(out_raw);
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;

  std::size_t scalar_begin = 0;
  if (vectorized) {
    const std::size_t vectors = count / kPerVector;
    if (ninputs <= 2) {
      reduce_one_or_two<E, Op>(in, ninputs == 2, out, vectors, nranks, thread, threads);
    } else if constexpr (inputs_per_batch<S>() > 2) {
      reduce_accumulating<E, Op>(in, ninputs, out, vectors, nranks, thread, threads);
    } else {
      reduce_accumulating_pairs<E, Op>(in, ninputs, out, vectors, nranks, thread, threads);
    }
    scalar_begin = vectors * kPerVector;
  }
  // The tail past the last whole vector, or everything when some pointer is not 16-byte aligned.
  for (std::size_t i = scalar_begin + thread; i < count; i += threads) {
    A acc = E::load(static_cast<const S*>(in.ptr[0])[i]);
    for (int j = 1; j < ninputs; ++j) acc = combine<Op>(acc, E::load(static_cast<const S*>(in.ptr[j])[i]));
    out[i] = E::store(finish<Op>(acc, nranks));
  }
  if (gate.ctas_done != nullptr) gated::raise(gate);
}

template <class E, ReduceOp Op>
cudaError_t launch(const ReduceTask& task, cudaStream_t stream, int max_ctas, const ReduceGate& gate) {
  KernelInputs inputs{};
  bool vectorized = aligned16(task.out);
  for (int j = 0; j < task.ninputs; ++j) {
    inputs.ptr[j] = task.inputs[j];
    vectorized = vectorized && aligned16(task.inputs[j]);
  }
  constexpr std::size_t kPerVector = sizeof(uint4) / sizeof(typename E::Storage);
  // Enough CTAs for the work at unroll_of's vectors per thread and pass, never more than the budget. With one or two
  // inputs a thread takes up to kPairUnroll vectors a pass, so mid-size reductions spread over more CTAs than one pass
  // would need (2- and 8-byte types twice, u8 four times, 4-byte types as many): the counts stayed as they were when
  // that path came (2026-12-01), so that small calls, the mailboxes' gated kernels among them, kept their CTAs; fewer
  // were not measured.
  const std::size_t per_cta =
      vectorized ? static_cast<std::size_t>(kThreads) * unroll_of<typename E::Storage>() * kPerVector : kThreads;
  const std::size_t wanted = (task.count + per_cta - 1) / per_cta;
  const int ctas = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(wanted, max_ctas)));
  // The parameters as the kernel takes them, each of exactly its type (device::cuda::launch_kernel).
  int ninputs = task.ninputs, nranks = task.nranks;
  void* out = task.out;
  std::size_t count = task.count;
  ReduceGate gate_argument = gate;
  void* args[] = {&inputs, &ninputs, &out, &count, &nranks, &vectorized, &gate_argument};
  return device::cuda::launch_kernel(reinterpret_cast<const void*>(&reduce_kernel<E, Op>), ctas, kThreads, stream,
                                     args);
}

/// The reduction kernel's instance of an element type and operator (load_kernels, for_each_kernel).
constexpr auto reduce_kernel_of = [](auto element, auto which) {
  return reinterpret_cast<const void*>(&reduce_kernel<decltype(element), decltype(which)::value>);
};

}  // namespace

void load_reduce_kernels(int device) {
  load_kernels(device, "reduction kernel", reduce_kernel_of);
  resident_reduce_ctas(device);  // now rather than at the first gated launch
}

int resident_reduce_ctas(int device) { return resident_ctas(device, reduce_kernel_of, kThreads); }

void launch_reduce_cuda(const ReduceTask& task, void* cuda_stream, int device, int max_ctas, const ReduceGate* gate) {
  if (gate == nullptr && (task.count == 0 || task.ninputs <= 0)) return;
  if (gate != nullptr && (!gated::gate_fits(*gate) || (gate->announces > 0 && gate->ctas_published == nullptr))) {
    throw Error(ErrorCode::Internal, "gated reduction: more than " + std::to_string(kMaxGatePeers) +
                                         " waits, pre-waits or publication destinations, more than " +
                                         std::to_string(2 * kMaxGatePeers) +
                                         " raises or announcements, or raises or announcements without a CTA count");
  }
  if (task.ninputs > kMaxReduceInputs) {
    throw UnavailableError(std::string("CUDA reduction of ") + std::to_string(task.ninputs) + " inputs: at most " +
                           std::to_string(kMaxReduceInputs) + " ranks are supported");
  }
  LaunchDevice current(device);
  // A gated kernel's CTAs must all run at once (resident_reduce_ctas): on a GPU of few SMs, fewer of them.
  if (gate != nullptr) {
    const int resident = resident_reduce_ctas(device);
    if (resident > 0) max_ctas = std::min(max_ctas, resident);
  }
  cudaStream_t stream = static_cast<cudaStream_t>(cuda_stream);
  cudaError_t status = cudaSuccess;
  dispatch_type(task.type, [&](auto element) {
    dispatch_op(task.op, [&](auto which) {
      status = launch<decltype(element), decltype(which)::value>(task, stream, max_ctas,
                                                                 gate != nullptr ? *gate : ReduceGate{});
    });
  });
  if (status != cudaSuccess) {
    throw_launch_error(status, std::string("reduction kernel launch (") + datatype_name(task.type) + " " +
                                   reduce_op_name(task.op) + ", " + std::to_string(task.count) + " elements, " +
                                   std::to_string(task.ninputs) + " inputs)");
  }
}

}  // namespace pickle::coll
