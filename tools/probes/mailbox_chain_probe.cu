// mailbox_chain_probe: what each step of a mailbox allreduce (src/collectives/mailbox.cpp) costs on the GPUs, rebuilt
// from raw CUDA in one process with no host in the loop. On four H200s pickle's mailbox allreduce takes 34-48 us per
// call from 4 KiB to 1 MiB and 23-30 on two, where NCCL takes 11-18 and 7-14 (docs/results/2026-11-28i-h200x4.md);
// this probe says which of the stream's steps take that time and what a different step would save.
//
// Every GPU r of n (peer access between all) runs `calls` calls back to back on one stream; call c (1-based) uses
// cell c % 4 of each peer's mailbox:
//   wait emptied    (c > 4) one batched wait until every peer reduced what r put into that cell 4 calls ago
//   copies          r's input into its cell at every peer (cudaMemcpyAsync each, the copy engines of GPU r)
//   raise filled    one batched write of c into every peer's "filled from r" word
//   wait filled     one batched wait until every peer's "filled" word for r reached c
//   reduce          f32 sum of r's input and the n - 1 cells into the output (at most 8 CTAs of 256 threads)
//   raise emptied   one batched write of c into every peer's "emptied by r" word
// as pickle does, with the flags in mapped pinned host memory ("host flags", pickle's signal areas) or in the
// waiter's GPU memory, written by the peers through peer access ("device flags"). Variants:
//   chain                     the steps above
//   chain, no reduce          without the reduction (the copies and flags alone)
//   chain, spin reduce        the reduction kernel waits for the filled words itself (volatile loads), instead of a
//                             stream wait before it: its launch overlaps the wait for the peers
//   ... raising               the spinning reduction also raises the emptied words itself (its last CTA, after a
//                             system fence), instead of a stream write after it
//   side copies, spin ...     the copies and their filled words on a second stream that waits for an event of the
//                             caller's stream (the input is ready), the raising reduction on the caller's stream: the
//                             kernel follows the caller's work at once and overlaps the copies' latency
//   copies only               the copies alone, call after call: the copy engines' rate for these sizes
//   reduce only               the reduction kernel alone, call after call: the launch rate
// Streams wait at a gate (a host word) until every call is queued (a stream's queue is finite: should the host block
// on a full queue, a watchdog opens the gate after 2 s and the probe says the figure includes enqueueing). Time per
// call = (stop - start) / calls on the slowest GPU, median of `repeats`. The last call's output is checked (input of
// GPU r holds r + 1) and a mismatch fails the probe; a chain that does not finish within 10 s prints its flag words
// and fails it. With one GPU, two ranks run on it as two streams. Not part of pickle: a measurement tool
// (docs/results).
//
// Usage: mailbox_chain_probe [calls=24] [repeats=7] [bytes...=4K 64K 1M]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;

constexpr int kDepth = 4, kMaxGpus = 8, kMaxCtas = 8, kThreads = 256, kEvents = 64;

enum class Variant { Chain, ChainNoReduce, ChainSpin, ChainSpinRaise, SideSpinRaise, CopiesOnly, ReduceOnly };

struct Inputs {
  const float* in[kMaxGpus];
  int n;
};

struct Raise {
  unsigned* word[kMaxGpus];  // the peers' "emptied by this GPU" words (null: none)
  unsigned* done;            // CTAs finished so far (the last one raises, then resets it)
};

// Waits (when `filled` is set) until every filled word reached `expected`, sums the n inputs into out (float4 where
// the count allows), and, when `raise.done` is set, has its last CTA write `expected` into every raise word.
__global__ void reduce_kernel(Inputs inputs, float* out, std::size_t count, const volatile unsigned* filled,
                              int self, unsigned expected, Raise raise) {
  if (filled != nullptr) {
    if (threadIdx.x < static_cast<unsigned>(inputs.n) && static_cast<int>(threadIdx.x) != self) {
      while (filled[threadIdx.x] < expected) {
      }
    }
    __syncthreads();
    __threadfence_system();
  }
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  if (count % 4 == 0) {
    for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count / 4; i += stride) {
      float4 sum = reinterpret_cast<const float4*>(inputs.in[0])[i];
      for (int k = 1; k < inputs.n; ++k) {
        const float4 x = reinterpret_cast<const float4*>(inputs.in[k])[i];
        sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
      }
      reinterpret_cast<float4*>(out)[i] = sum;
    }
  } else {
    for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
      float sum = 0;
      for (int k = 0; k < inputs.n; ++k) sum += inputs.in[k][i];
      out[i] = sum;
    }
  }
  if (raise.done == nullptr) return;
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence_system();  // this CTA's reads of the cells are done before the peers hear of it
  if (atomicAdd(raise.done, 1u) != gridDim.x - 1) return;
  *raise.done = 0;
  for (int p = 0; p < inputs.n; ++p) {
    if (raise.word[p] != nullptr) *reinterpret_cast<volatile unsigned*>(raise.word[p]) = expected;
  }
}

using BatchMemOp = CUresult (*)(CUstream, unsigned, CUstreamBatchMemOpParams*, unsigned);

BatchMemOp batch_mem_op() {
  BatchMemOp op = nullptr;
  cudaDriverEntryPointQueryResult found;
  check(cudaGetDriverEntryPointByVersion("cuStreamBatchMemOp", reinterpret_cast<void**>(&op), 12000,
                                         cudaEnableDefault, &found),
        "cuStreamBatchMemOp");
  return op;
}

struct Gpu {
  cudaStream_t stream;
  cudaStream_t side;            // the copies' stream of the "side copies" variant
  cudaEvent_t ready[kEvents];   // per call: the input is ready (recorded on `stream`, awaited on `side`)
  cudaEvent_t start, stop;
  float* in;
  float* out;
  char* cells;                  // [peer][depth] cells of max_bytes, written by the peers
  unsigned* device_words;       // filled[kMaxGpus], emptied[kMaxGpus]: the words this GPU waits on
  unsigned* host_words;         // the same in mapped pinned memory
  unsigned* done;               // the reduction's count of finished CTAs
};

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 24;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  std::vector<std::size_t> sizes;
  for (int i = 3; i < argc; ++i) sizes.push_back(probe::parse_bytes(argv[i]));
  if (sizes.empty()) sizes = {4096, 65536, 1 << 20};
  const std::size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  // One rank per GPU; on a machine with one GPU, two ranks on it as two streams (the cells' copies then stay in one
  // HBM: the stream's steps are measured, not the link).
  const int gpu_count = probe::gpus_at_least(1);
  if (gpu_count == 0) return 0;
  const int n = std::min(std::max(gpu_count, 2), kMaxGpus);
  auto device_of = [&](int r) { return r % gpu_count; };
  const BatchMemOp batch = batch_mem_op();

  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<Gpu> gpus(static_cast<std::size_t>(n));
  unsigned* gate = nullptr;
  unsigned* host_words = nullptr;  // [gpu][2 * kMaxGpus]
  check(cudaHostAlloc(&gate, sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
  check(cudaHostAlloc(&host_words, n * 2 * kMaxGpus * sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc");
  for (int r = 0; r < n; ++r) {
    Gpu& g = gpus[static_cast<std::size_t>(r)];
    check(cudaSetDevice(device_of(r)), "cudaSetDevice");
    for (int p = 0; p < n && r < gpu_count; ++p) {
      if (device_of(p) != r) check(cudaDeviceEnablePeerAccess(device_of(p), 0), "cudaDeviceEnablePeerAccess");
    }
    check(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&g.side, cudaStreamNonBlocking), "cudaStreamCreate");
    for (auto& e : g.ready) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreate(&g.start), "cudaEventCreate");
    check(cudaEventCreate(&g.stop), "cudaEventCreate");
    check(cudaMalloc(&g.in, max_bytes), "cudaMalloc");
    check(cudaMalloc(&g.out, max_bytes), "cudaMalloc");
    check(cudaMalloc(&g.cells, static_cast<std::size_t>(n) * kDepth * max_bytes), "cudaMalloc");
    check(cudaMalloc(&g.device_words, 2 * kMaxGpus * sizeof(unsigned)), "cudaMalloc");
    g.host_words = host_words + r * 2 * kMaxGpus;
    std::vector<float> ones(max_bytes / sizeof(float), static_cast<float>(r + 1));
    check(cudaMemcpy(g.in, ones.data(), max_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    // Load the kernel now: CUDA loads modules lazily, at the first launch, and that load waits for the device, which
    // would wait for the gate that the host opens only after that launch returns.
    check(cudaMalloc(&g.done, sizeof(unsigned)), "cudaMalloc");
    check(cudaMemset(g.done, 0, sizeof(unsigned)), "cudaMemset");
    reduce_kernel<<<1, kThreads, 0, g.stream>>>(Inputs{{}, 0}, g.out, 0, nullptr, r, 0, Raise{});
    check(cudaStreamSynchronize(g.stream), "reduce_kernel (warm-up)");
  }

  // The word GPU `waiter` waits on for `from`'s filled (or emptied) count.
  auto word = [&](bool device_flags, int waiter, int from, bool emptied) {
    const Gpu& g = gpus[static_cast<std::size_t>(waiter)];
    unsigned* base = device_flags ? g.device_words : g.host_words;
    return reinterpret_cast<CUdeviceptr>(base + (emptied ? kMaxGpus : 0) + from);
  };
  // One flag: one cuStreamWriteValue32 / cuStreamWaitValue32, as pickle (the host's call is cheaper); more: a batch.
  const probe::StreamValueOp write_value = probe::stream_value_op("cuStreamWriteValue32");
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  auto flags_op = [&](cudaStream_t s, std::vector<CUstreamBatchMemOpParams>& ops) {
    if (ops.size() == 1 && ops[0].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32) {
      check(write_value(s, ops[0].writeValue.address, ops[0].writeValue.value, 0), "cuStreamWriteValue32");
    } else if (ops.size() == 1) {
      check(wait_value(s, ops[0].waitValue.address, ops[0].waitValue.value, CU_STREAM_WAIT_VALUE_GEQ),
            "cuStreamWaitValue32");
    } else if (!ops.empty()) {
      check(batch(s, static_cast<unsigned>(ops.size()), ops.data(), 0), "cuStreamBatchMemOp");
    }
  };
  // A chain that does not finish within 10 s: the flag words on stderr, then exit 1 (a probe must not hang).
  auto await_stop = [&](int r, const char* name, std::size_t bytes) {
    Gpu& g = gpus[static_cast<std::size_t>(r)];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (cudaEventQuery(g.stop) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() < deadline) continue;
      std::fprintf(stderr, "mailbox_chain_probe: %s, %zu bytes: GPU %d has not finished after 10 s\n", name, bytes, r);
      for (int w = 0; w < n; ++w) {
        unsigned words[2 * kMaxGpus];
        cudaStream_t side;
        check(cudaSetDevice(device_of(w)), "cudaSetDevice");
        check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "cudaStreamCreate");
        check(cudaMemcpyAsync(words, gpus[static_cast<std::size_t>(w)].device_words, sizeof words,
                              cudaMemcpyDeviceToHost, side), "cudaMemcpyAsync");
        check(cudaStreamSynchronize(side), "cudaStreamSynchronize");
        std::fprintf(stderr, "  GPU %d waits on: host filled/emptied", w);
        for (int p = 0; p < n; ++p) {
          std::fprintf(stderr, " %u/%u", gpus[static_cast<std::size_t>(w)].host_words[p],
                       gpus[static_cast<std::size_t>(w)].host_words[kMaxGpus + p]);
        }
        std::fprintf(stderr, "; device filled/emptied");
        for (int p = 0; p < n; ++p) std::fprintf(stderr, " %u/%u", words[p], words[kMaxGpus + p]);
        std::fprintf(stderr, "\n");
      }
      std::exit(1);
    }
  };
  auto write_op = [](CUdeviceptr address, unsigned value) {
    CUstreamBatchMemOpParams op{};
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = address;
    op.writeValue.value = value;
    return op;
  };
  auto wait_op = [](CUdeviceptr address, unsigned value) {
    CUstreamBatchMemOpParams op{};
    op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    op.waitValue.address = address;
    op.waitValue.value = value;
    op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    return op;
  };

  const struct {
    Variant variant;
    bool device_flags;
    const char* name;
  } variants[] = {{Variant::Chain, false, "chain, host flags"},
                  {Variant::Chain, true, "chain, device flags"},
                  {Variant::ChainNoReduce, false, "chain, no reduce, host flags"},
                  {Variant::ChainNoReduce, true, "chain, no reduce, device flags"},
                  {Variant::ChainSpin, false, "chain, spin reduce, host flags"},
                  {Variant::ChainSpin, true, "chain, spin reduce, device flags"},
                  {Variant::ChainSpinRaise, true, "chain, spin reduce raising, dev"},
                  {Variant::SideSpinRaise, true, "side copies, spin raising, dev"},
                  {Variant::CopiesOnly, false, "copies only"},
                  {Variant::ReduceOnly, false, "reduce only"}};

  std::printf("mailbox_chain_probe: %d ranks on %d GPUs, %d calls x %d repeats, us per call (slowest rank, median)\n",
              n, std::min(gpu_count, n), calls, repeats);
  std::printf("%-34s", "bytes");
  for (std::size_t b : sizes) std::printf("%10zu", b);
  std::printf("\n");
  for (const auto& v : variants) {
    std::printf("%-34s", v.name);
    for (std::size_t bytes : sizes) {
      const std::size_t count = bytes / sizeof(float);
      const int ctas = static_cast<int>(std::min<std::size_t>(kMaxCtas, (count + kThreads - 1) / kThreads));
      std::vector<float> per_call;
      for (int repeat = 0; repeat < repeats; ++repeat) {
        for (int r = 0; r < n; ++r) {
          check(cudaSetDevice(device_of(r)), "cudaSetDevice");
          check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
          check(cudaMemset(gpus[static_cast<std::size_t>(r)].device_words, 0, 2 * kMaxGpus * sizeof(unsigned)),
                "cudaMemset");
          check(cudaMemset(gpus[static_cast<std::size_t>(r)].out, 0, bytes), "cudaMemset");
          check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        }
        std::fill(host_words, host_words + n * 2 * kMaxGpus, 0u);
        __atomic_store_n(gate, 0u, __ATOMIC_RELEASE);
        std::atomic<bool> queued{false}, forced{false};
        std::thread watchdog([&] {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
          while (!queued.load() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          if (!queued.load()) {
            forced = true;
            __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
          }
        });
        for (int r = 0; r < n; ++r) {
          Gpu& g = gpus[static_cast<std::size_t>(r)];
          check(cudaSetDevice(device_of(r)), "cudaSetDevice");
          std::vector<CUstreamBatchMemOpParams> ops{wait_op(reinterpret_cast<CUdeviceptr>(gate), 1)};
          flags_op(g.stream, ops);
          check(cudaEventRecord(g.start, g.stream), "cudaEventRecord");
        }
        for (int c = 1; c <= calls; ++c) {
          const int cell = c % kDepth;
          for (int r = 0; r < n; ++r) {
            Gpu& g = gpus[static_cast<std::size_t>(r)];
            check(cudaSetDevice(device_of(r)), "cudaSetDevice");
            const bool raising = v.variant == Variant::ChainSpinRaise || v.variant == Variant::SideSpinRaise;
            const bool spin = v.variant == Variant::ChainSpin || raising;
            const bool chain = v.variant == Variant::Chain || v.variant == Variant::ChainNoReduce || spin;
            cudaStream_t copy_stream = g.stream;
            if (v.variant == Variant::SideSpinRaise) {
              copy_stream = g.side;
              check(cudaEventRecord(g.ready[c % kEvents], g.stream), "cudaEventRecord");
              check(cudaStreamWaitEvent(g.side, g.ready[c % kEvents], 0), "cudaStreamWaitEvent");
            }
            std::vector<CUstreamBatchMemOpParams> ops;
            if (chain && c > kDepth) {
              for (int p = 0; p < n; ++p) {
                if (p != r) ops.push_back(wait_op(word(v.device_flags, r, p, true), static_cast<unsigned>(c - kDepth)));
              }
              flags_op(copy_stream, ops);
            }
            if (v.variant != Variant::ReduceOnly) {
              for (int p = 0; p < n; ++p) {
                if (p == r) continue;
                const std::size_t offset = (static_cast<std::size_t>(r) * kDepth + cell) * max_bytes;
                char* to = gpus[static_cast<std::size_t>(p)].cells + offset;
                check(cudaMemcpyAsync(to, g.in, bytes, cudaMemcpyDefault, copy_stream), "cudaMemcpyAsync");
              }
            }
            if (chain) {
              ops.clear();
              for (int p = 0; p < n; ++p) {
                if (p != r) ops.push_back(write_op(word(v.device_flags, p, r, false), static_cast<unsigned>(c)));
              }
              flags_op(copy_stream, ops);
            }
            if (v.variant == Variant::Chain || v.variant == Variant::ChainNoReduce) {
              ops.clear();
              for (int p = 0; p < n; ++p) {
                if (p != r) ops.push_back(wait_op(word(v.device_flags, r, p, false), static_cast<unsigned>(c)));
              }
              flags_op(g.stream, ops);
            }
            if (v.variant == Variant::Chain || spin || v.variant == Variant::ReduceOnly) {
              Inputs inputs{};
              inputs.n = n;
              for (int p = 0; p < n; ++p) {
                inputs.in[p] = p == r ? g.in
                                      : reinterpret_cast<const float*>(
                                            g.cells + (static_cast<std::size_t>(p) * kDepth + cell) * max_bytes);
              }
              const volatile unsigned* filled =
                  spin ? reinterpret_cast<const volatile unsigned*>(word(v.device_flags, r, 0, false))
                      : nullptr;
              Raise raise{};
              if (raising) {
                raise.done = g.done;
                for (int p = 0; p < n; ++p) {
                  if (p != r) raise.word[p] = reinterpret_cast<unsigned*>(word(v.device_flags, p, r, true));
                }
              }
              reduce_kernel<<<ctas, kThreads, 0, g.stream>>>(inputs, g.out, count, filled, r,
                                                              static_cast<unsigned>(c), raise);
              check(cudaGetLastError(), "reduce_kernel");
            }
            if (chain && !raising) {
              ops.clear();
              for (int p = 0; p < n; ++p) {
                if (p != r) ops.push_back(write_op(word(v.device_flags, p, r, true), static_cast<unsigned>(c)));
              }
              flags_op(g.stream, ops);
            }
          }
        }
        for (int r = 0; r < n; ++r) {
          Gpu& g = gpus[static_cast<std::size_t>(r)];
          check(cudaSetDevice(device_of(r)), "cudaSetDevice");
          check(cudaEventRecord(g.ready[0], g.side), "cudaEventRecord");  // the side stream's copies end first
          check(cudaStreamWaitEvent(g.stream, g.ready[0], 0), "cudaStreamWaitEvent");
          check(cudaEventRecord(g.stop, g.stream), "cudaEventRecord");
        }
        queued = true;
        watchdog.join();
        if (forced) std::fprintf(stderr, "mailbox_chain_probe: %s, %zu bytes: a stream's queue filled up before the "
                                         "gate opened (fewer calls would not include enqueueing)\n", v.name, bytes);
        __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
        float slowest = 0;
        for (int r = 0; r < n; ++r) {
          Gpu& g = gpus[static_cast<std::size_t>(r)];
          check(cudaSetDevice(device_of(r)), "cudaSetDevice");
          await_stop(r, v.name, bytes);
          float ms = 0;
          check(cudaEventElapsedTime(&ms, g.start, g.stop), "cudaEventElapsedTime");
          slowest = std::max(slowest, ms);
          if (v.variant == Variant::Chain || v.variant == Variant::ChainSpin || v.variant == Variant::ChainSpinRaise ||
              v.variant == Variant::SideSpinRaise) {
            std::vector<float> out(count);
            check(cudaMemcpy(out.data(), g.out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
            const float expected = static_cast<float>(n * (n + 1) / 2);
            for (std::size_t i = 0; i < count; ++i) {
              if (out[i] != expected) {
                std::fprintf(stderr, "\nmailbox_chain_probe: %s, %zu bytes: GPU %d element %zu is %g, not %g\n",
                             v.name, bytes, r, i, out[i], expected);
                return 1;
              }
            }
          }
        }
        per_call.push_back(slowest * 1000.f / calls);
      }
      std::sort(per_call.begin(), per_call.end());
      std::printf("%10.2f", per_call[per_call.size() / 2]);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}
