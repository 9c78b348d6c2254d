// ll_poll_probe: why the mailboxes' LL form (src/collectives/ll_allreduce_cuda.cu) runs slow when the hosts set the
// pace. On two H200s a decode step's 8 KB allreduces took 8-9 us each in the LL form, but `bench coll`'s back-to-back
// calls, where each host needs about 12 us per call, ran whole repeats at 20-30 us per call where the loads form kept
// 12-14 (docs/results/2026-11-30f-h200x2.md). The suspect: while one GPU's kernel waits for the other's lines (its
// host launched it first), its 1024 threads poll the lines that the other GPU's NVLink stores land in, and slow them.
//
// The LL call rebuilt in raw CUDA on GPUs 0 and 1 (peer access), one process, one host thread: call c (1-based) of
// each GPU waits until the peer has reduced its call c - 4 (the cell's previous use), writes its input (floats, GPU g
// holds g + 1) into its cell c % 4 at the peer as 16-byte lines {data, c, data, c}, polls its own cell's lines until
// both flags are c, sums, stores, and raises the peer's "emptied" word to c. Variants, each at every size:
//   ctas      the kernel's CTAs (the lines striped over all their threads; the last CTA to finish raises): on two
//             H200s pickle's LL kernel on 8 CTAs of 1024 threads took 128 KB calls in 18-19 us against the loads
//             form's 13 (docs/results/2026-11-30h-h200x2.md); does the plain form of the call slow down alike?
//   threads   the CTA's threads (1024 as pickle's kernel, fewer with more lines each)
//   backoff   nanoseconds of __nanosleep between a thread's polls of a line that has not arrived (0: spin; on one
//             CTA only, as host)
//   watcher   none, host or device: the CTA's last warp polls nothing; its first thread reads a word (pinned host
//             memory, or this GPU's memory) about once a microsecond until the CTA's workers are done, as pickle's LL
//             kernel's watcher did until 2026-11-30h, when such reads over PCIe were found to slow calls on several
//             CTAs (128 KB on 8 CTAs: 17-22 us against 11 without; docs/results/2026-11-30h-h200x2.md). On 1 and
//             8 CTAs of 1024 threads: is it the PCIe reads, or any watcher loop?
//   host      every polling thread also reads a word of pinned host memory every 64th poll (as pickle's kernel did
//             until 2026-11-30f for a failed pair's release; since then one watcher thread reads it), or not
// and two paces:
//   gpu       calls queued back to back behind a gate that opens once all are queued: the kernels' own time per
//             call (a decode step's regime)
//   host      the host launches GPU 0's call, waits skew_us, launches GPU 1's, waits gap_us: the hosts set the pace
//             (bench coll's regime); every 8 calls the order turns, so that each GPU is the early one in turn
// Time per call = (last event - first event) / calls on the slower GPU, median of `repeats`; in the host pace a
// healthy variant runs at about skew_us + gap_us plus the launches. Each call's data carries its number (GPU g sends
// g + 1 + c), so the last call's output (3 + 2 x calls in every element) shows a line taken from an older call; a
// mismatch fails the probe, as does a run that does not finish within 10 s. Not part of pickle: a measurement tool
// (docs/results).
//
// Usage: ll_poll_probe [calls=400] [repeats=5] [gap_us=12] [skew_us=3] [bytes...=8K 16K 32K]
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collectives/ll_lines.cuh"
#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;

constexpr int kDepth = 4, kGpus = 2;

struct CallArgs {
  const float* in;
  float* out;
  std::size_t count;           // floats (even)
  void* push_cell;             // this GPU's cell at the peer (peer memory)
  const void* own_cell;        // the peer's cell here
  unsigned* peer_emptied;      // in the peer's memory: "this GPU reduced the peer's call"
  const unsigned* my_emptied;  // here, written by the peer
  unsigned flag;               // the call's number
  int backoff_ns;
  const unsigned* host_word;  // pinned host memory (stays 0), or null: no host reads
  unsigned* ctas_done;        // here: CTAs of this call that have reduced (0 between calls; the last resets it)
  const unsigned* watch_word;  // the watcher's word (stays 0), or null: no watcher, every thread a worker
};

__global__ void __launch_bounds__(1024) ll_call(CallArgs a) {
  if (threadIdx.x == 0 && a.flag > kDepth) {  // every CTA's: it writes into the cell
    while (static_cast<int>(*reinterpret_cast<const volatile unsigned*>(a.my_emptied) - (a.flag - kDepth)) < 0) {
    }
  }
  __shared__ int workers_done;
  if (threadIdx.x == 0) workers_done = 0;
  __syncthreads();
  const int workers = a.watch_word != nullptr ? static_cast<int>(blockDim.x) - 32 : static_cast<int>(blockDim.x);
  if (static_cast<int>(threadIdx.x) >= workers) {  // the watcher warp: its first thread reads, the others wait
    if (static_cast<int>(threadIdx.x) == workers) {
      unsigned seen = 0;  // stays 0
      while (*reinterpret_cast<volatile int*>(&workers_done) < workers) {
        seen |= *reinterpret_cast<const volatile unsigned*>(a.watch_word);
        __nanosleep(1000);
      }
      if (seen != 0) a.out[0] = 0;  // never: only so that the reads happen
    }
    __syncthreads();
    return;  // the raise below is thread 0's, a worker
  }
  const std::size_t lines = a.count / 2;
  const float mine = static_cast<float>(a.flag);
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * workers + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * workers;
  for (std::size_t line = first; line < lines; line += stride) {
    const uint2 data = make_uint2(__float_as_uint(a.in[2 * line] + mine), __float_as_uint(a.in[2 * line + 1] + mine));
    pickle::coll::store_flagged(a.push_cell, line, data, a.flag);
  }
  unsigned host_seen = 0;  // stays 0: read only so that the loads happen
  for (std::size_t line = first; line < lines; line += stride) {
    uint4 v = pickle::coll::load_flagged(a.own_cell, line);
    for (unsigned poll = 1; v.y != a.flag || v.w != a.flag; ++poll) {
      if (a.backoff_ns > 0) __nanosleep(a.backoff_ns);
      if (a.host_word != nullptr && poll % 64 == 0) {
        host_seen |= *reinterpret_cast<const volatile unsigned*>(a.host_word);
      }
      v = pickle::coll::load_flagged(a.own_cell, line);
    }
    a.out[2 * line] = a.in[2 * line] + mine + __uint_as_float(v.x) + static_cast<float>(host_seen);
    a.out[2 * line + 1] = a.in[2 * line + 1] + mine + __uint_as_float(v.z);
  }
  atomicAdd(&workers_done, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (gridDim.x > 1) {
      __threadfence();
      if (atomicAdd(a.ctas_done, 1u) != gridDim.x - 1) return;
      *a.ctas_done = 0;
    }
    __threadfence_system();
    *reinterpret_cast<volatile unsigned*>(a.peer_emptied) = a.flag;
  }
}

struct Gpu {
  float* in = nullptr;
  float* out = nullptr;
  uint4* cells = nullptr;  // kDepth cells, where the peer pushes
  unsigned* emptied = nullptr;
  unsigned* ctas_done = nullptr;
  unsigned* zero_word = nullptr;  // a word of this GPU's memory that stays 0 (the device watcher reads it)
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

void spin_us(double us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// Holds a stream until the host opens the gate (a word of pinned host memory).
__global__ void gate_kernel(const unsigned* gate) {
  while (*reinterpret_cast<const volatile unsigned*>(gate) == 0) {
  }
}

enum class Watcher { kNone, kHost, kDevice };

const char* watcher_name(Watcher w) { return w == Watcher::kHost ? "host" : w == Watcher::kDevice ? "device" : "none"; }

struct Variant {
  int ctas;
  int threads;
  int backoff_ns;
  bool host_reads;
  bool host_pace;
  Watcher watcher = Watcher::kNone;
};

/// One run of `calls` calls; the slower GPU's microseconds per call. host_words[0] is the gate, host_words[1] the
/// word the polls read.
double run(Gpu (&gpus)[kGpus], unsigned* host_words, std::size_t bytes, std::size_t max_bytes, const Variant& v,
           double gap_us, double skew_us, int calls) {
  const std::size_t cell_lines = max_bytes / 8;
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(cudaMemset(gpus[g].cells, 0, kDepth * cell_lines * sizeof(uint4)), "clear the cells");
    check(cudaMemset(gpus[g].emptied, 0, sizeof(unsigned)), "clear the emptied word");
    check(cudaMemset(gpus[g].ctas_done, 0, sizeof(unsigned)), "clear the CTA count");
    check(cudaDeviceSynchronize(), "clear");
  }
  __atomic_store_n(&host_words[0], v.host_pace ? 1u : 0u, __ATOMIC_RELEASE);  // the host pace needs no gate
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    gate_kernel<<<1, 1, 0, gpus[g].stream>>>(host_words);
    check(cudaGetLastError(), "launch the gate");
    check(cudaEventRecord(gpus[g].start, gpus[g].stream), "record start");
  }
  // Should the host block on a full launch queue behind the gate, this opens it after 2 s (the figure then includes
  // enqueueing, as stderr says).
  std::atomic<bool> queued{false};
  std::thread watchdog([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!queued.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!queued.load()) {
      std::fprintf(stderr,
                   "ll_poll_probe: the launch queue filled before the gate opened: this figure includes "
                   "enqueueing\n");
      __atomic_store_n(&host_words[0], 1u, __ATOMIC_RELEASE);
    }
  });
  for (int c = 1; c <= calls; ++c) {
    const bool turned = v.host_pace && (c / 8) % 2 == 1;
    for (int i = 0; i < kGpus; ++i) {
      const int g = turned ? kGpus - 1 - i : i, peer = 1 - g;
      const std::size_t cell = static_cast<std::size_t>(c % kDepth) * cell_lines;
      const CallArgs a{gpus[g].in,
                       gpus[g].out,
                       bytes / sizeof(float),
                       gpus[peer].cells + cell,
                       gpus[g].cells + cell,
                       gpus[peer].emptied,
                       gpus[g].emptied,
                       static_cast<unsigned>(c),
                       v.backoff_ns,
                       v.host_reads ? host_words + 1 : nullptr,
                       gpus[g].ctas_done,
                       v.watcher == Watcher::kHost     ? host_words + 1
                       : v.watcher == Watcher::kDevice ? gpus[g].zero_word
                                                       : nullptr};
      check(cudaSetDevice(g), "cudaSetDevice");
      ll_call<<<v.ctas, v.threads, 0, gpus[g].stream>>>(a);
      check(cudaGetLastError(), "launch");
      if (v.host_pace && i == 0) spin_us(skew_us);
    }
    if (v.host_pace) spin_us(gap_us);
  }
  queued.store(true);
  __atomic_store_n(&host_words[0], 1u, __ATOMIC_RELEASE);
  watchdog.join();
  double slowest = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(cudaEventRecord(gpus[g].stop, gpus[g].stream), "record stop");
    while (cudaEventQuery(gpus[g].stop) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "ll_poll_probe: GPU %d did not finish %d calls of %zu bytes within 10 s\n", g, calls,
                     bytes);
        std::_Exit(1);  // kernels still spin: no exit handlers
      }
    }
    float ms = 0;
    check(cudaEventElapsedTime(&ms, gpus[g].start, gpus[g].stop), "elapsed");
    slowest = std::max(slowest, 1000.0 * ms / calls);
    std::vector<float> out(bytes / sizeof(float));
    check(cudaMemcpy(out.data(), gpus[g].out, bytes, cudaMemcpyDeviceToHost), "download");
    const float expected = 3.0f + 2.0f * static_cast<float>(calls);
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] != expected) {
        std::fprintf(stderr, "ll_poll_probe: GPU %d element %zu is %g, not %g (%zu bytes, %d x %d threads)\n", g, i,
                     static_cast<double>(out[i]), static_cast<double>(expected), bytes, v.ctas, v.threads);
        std::exit(1);
      }
    }
  }
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 400;
  const int repeats = std::max(1, argc > 2 ? std::atoi(argv[2]) : 5);
  const double gap_us = argc > 3 ? std::atof(argv[3]) : 12;
  const double skew_us = argc > 4 ? std::atof(argv[4]) : 3;
  std::vector<std::size_t> sizes;
  for (int i = 5; i < argc; ++i) sizes.push_back(probe::parse_bytes(argv[i]));
  if (sizes.empty()) sizes = {8 << 10, 16 << 10, 32 << 10};
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < kGpus) {
    std::printf("ll_poll_probe: needs two GPUs; nothing to measure\n");
    return 0;
  }
  std::size_t max_bytes = 0;
  for (std::size_t bytes : sizes) {
    if (bytes == 0 || bytes % 8 != 0 || bytes > (std::size_t{1} << 20)) {
      std::fprintf(stderr, "ll_poll_probe: sizes must be multiples of 8 bytes up to 1M\n");
      return 1;
    }
    max_bytes = std::max(max_bytes, bytes);
  }
  if (calls < 1 || calls > 1000) {
    std::fprintf(stderr, "ll_poll_probe: calls must be 1 to 1000 (they queue behind a gate)\n");
    return 1;
  }
  unsigned* host_words = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&host_words), 2 * sizeof(unsigned),
                      cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc");
  host_words[0] = host_words[1] = 0;
  Gpu gpus[kGpus];
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(cudaDeviceEnablePeerAccess(1 - g, 0), "cudaDeviceEnablePeerAccess");
    check(cudaMalloc(&gpus[g].in, max_bytes), "cudaMalloc in");
    check(cudaMalloc(&gpus[g].out, max_bytes), "cudaMalloc out");
    check(cudaMalloc(&gpus[g].cells, kDepth * (max_bytes / 8) * sizeof(uint4)), "cudaMalloc cells");
    check(cudaMalloc(&gpus[g].emptied, sizeof(unsigned)), "cudaMalloc emptied");
    check(cudaMalloc(&gpus[g].ctas_done, sizeof(unsigned)), "cudaMalloc CTA count");
    check(cudaMalloc(&gpus[g].zero_word, sizeof(unsigned)), "cudaMalloc zero word");
    check(cudaMemset(gpus[g].zero_word, 0, sizeof(unsigned)), "clear the zero word");
    check(cudaStreamCreateWithFlags(&gpus[g].stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&gpus[g].start), "cudaEventCreate");
    check(cudaEventCreate(&gpus[g].stop), "cudaEventCreate");
    std::vector<float> in(max_bytes / sizeof(float), static_cast<float>(g + 1));
    check(cudaMemcpy(gpus[g].in, in.data(), max_bytes, cudaMemcpyHostToDevice), "upload");
  }
  std::printf("# ll_poll_probe: GPUs 0 and 1, %d calls x %d repeats (median), host pace: %.1f us gap, %.1f us skew\n",
              calls, repeats, gap_us, skew_us);
  std::printf("# %8s %5s %8s %10s %10s %7s %6s %12s\n", "bytes", "ctas", "threads", "backoff_ns", "host_reads",
              "watcher", "pace", "us_per_call");
  struct Shape {
    int ctas, threads;
  };
  // One CTA of 1024, 256 and 64 threads (the first measurements); then more CTAs, as pickle's LL kernel took them.
  const Shape shapes[] = {{1, 1024}, {1, 256}, {1, 64},  {2, 1024}, {4, 1024},
                          {8, 1024}, {4, 256}, {8, 256}, {16, 256}, {32, 128}};
  auto measure = [&](std::size_t bytes, const Variant& v) {
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r)
      times.push_back(run(gpus, host_words, bytes, max_bytes, v, gap_us, skew_us, calls));
    std::sort(times.begin(), times.end());
    std::printf("  %8zu %5d %8d %10d %10s %7s %6s %12.2f   (min %.2f, max %.2f)\n", bytes, v.ctas, v.threads,
                v.backoff_ns, v.host_reads ? "yes" : "no", watcher_name(v.watcher), v.host_pace ? "host" : "gpu",
                times[times.size() / 2], times.front(), times.back());
    std::fflush(stdout);
  };
  for (std::size_t bytes : sizes) {
    for (const Shape& shape : shapes) {
      const std::size_t threads = static_cast<std::size_t>(shape.ctas) * shape.threads;
      if (bytes / 8 > threads * 64) continue;                   // at most 64 lines per thread
      if (shape.ctas > 1 && bytes / 8 < threads / 2) continue;  // at least half a line per thread
      for (int backoff_ns : {0, 100, 500}) {
        for (bool host_reads : {false, true}) {
          if (shape.ctas > 1 && (backoff_ns != 0 || host_reads)) continue;
          for (bool host_pace : {false, true})
            measure(bytes, {shape.ctas, shape.threads, backoff_ns, host_reads, host_pace});
        }
      }
      // A watcher warp beside 31 warps of workers, as pickle's LL kernel (1024 threads, 1 and 8 CTAs).
      if (shape.threads == 1024 && (shape.ctas == 1 || shape.ctas == 8)) {
        for (Watcher watcher : {Watcher::kHost, Watcher::kDevice}) {
          for (bool host_pace : {false, true}) {
            measure(bytes, {shape.ctas, shape.threads, 0, false, host_pace, watcher});
          }
        }
      }
    }
  }
  return 0;
}
