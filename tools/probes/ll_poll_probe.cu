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
//   threads   the CTA's threads (1024 as pickle's kernel, fewer with more lines each)
//   backoff   nanoseconds of __nanosleep between a thread's polls of a line that has not arrived (0: spin)
// and two paces:
//   gpu       calls queued back to back: the kernels' own time per call (a decode step's regime)
//   host      the host launches GPU 0's call, waits skew_us, launches GPU 1's, waits gap_us: the hosts set the pace
//             (bench coll's regime); every 8 calls the order turns, so that each GPU is the early one in turn
// Time per call = (last event - first event) / calls on the slower GPU, median of `repeats`; in the host pace a
// healthy variant runs at about skew_us + gap_us plus the launches. Every call's last output is checked (3.0 in every
// element) and a mismatch fails the probe; a run that does not finish within 10 s fails it. Not part of pickle: a
// measurement tool (docs/results).
//
// Usage: ll_poll_probe [calls=400] [repeats=5] [gap_us=12] [skew_us=3] [bytes...=8K 16K 32K]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;

constexpr int kDepth = 4, kGpus = 2;

struct CallArgs {
  const float* in;
  float* out;
  std::size_t count;           // floats (even)
  uint4* push_cell;            // this GPU's cell at the peer (peer memory)
  const uint4* own_cell;       // the peer's cell here
  unsigned* peer_emptied;      // in the peer's memory: "this GPU reduced the peer's call"
  const unsigned* my_emptied;  // here, written by the peer
  unsigned flag;               // the call's number
  int backoff_ns;
};

__device__ void store_line(uint4* at, float a, float b, unsigned flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(__float_as_uint(a)), "r"(flag),
               "r"(__float_as_uint(b)), "r"(flag)
               : "memory");
}

__device__ uint4 load_line(const uint4* at) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at)
               : "memory");
  return v;
}

__global__ void __launch_bounds__(1024) ll_call(CallArgs a) {
  if (threadIdx.x == 0 && a.flag > kDepth) {
    while (static_cast<int>(*reinterpret_cast<const volatile unsigned*>(a.my_emptied) - (a.flag - kDepth)) < 0) {
    }
  }
  __syncthreads();
  const std::size_t lines = a.count / 2;
  for (std::size_t line = threadIdx.x; line < lines; line += blockDim.x) {
    store_line(a.push_cell + line, a.in[2 * line], a.in[2 * line + 1], a.flag);
  }
  for (std::size_t line = threadIdx.x; line < lines; line += blockDim.x) {
    uint4 v = load_line(a.own_cell + line);
    while (v.y != a.flag || v.w != a.flag) {
      if (a.backoff_ns > 0) __nanosleep(a.backoff_ns);
      v = load_line(a.own_cell + line);
    }
    a.out[2 * line] = a.in[2 * line] + __uint_as_float(v.x);
    a.out[2 * line + 1] = a.in[2 * line + 1] + __uint_as_float(v.z);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    *reinterpret_cast<volatile unsigned*>(a.peer_emptied) = a.flag;
  }
}

struct Gpu {
  float* in = nullptr;
  float* out = nullptr;
  uint4* cells = nullptr;  // kDepth cells, where the peer pushes
  unsigned* emptied = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

void spin_us(double us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// One run of `calls` calls; the slower GPU's microseconds per call.
double run(Gpu (&gpus)[kGpus], std::size_t bytes, std::size_t max_bytes, int threads, int backoff_ns, bool host_pace,
           double gap_us, double skew_us, int calls) {
  const std::size_t cell_lines = max_bytes / 8;
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(cudaMemset(gpus[g].cells, 0, kDepth * cell_lines * sizeof(uint4)), "clear the cells");
    check(cudaMemset(gpus[g].emptied, 0, sizeof(unsigned)), "clear the emptied word");
    check(cudaDeviceSynchronize(), "clear");
    check(cudaEventRecord(gpus[g].start, gpus[g].stream), "record start");
  }
  for (int c = 1; c <= calls; ++c) {
    const bool turned = host_pace && (c / 8) % 2 == 1;
    for (int i = 0; i < kGpus; ++i) {
      const int g = turned ? kGpus - 1 - i : i, peer = 1 - g;
      const std::size_t cell = static_cast<std::size_t>(c % kDepth) * cell_lines;
      CallArgs a{gpus[g].in,
                 gpus[g].out,
                 bytes / sizeof(float),
                 gpus[peer].cells + cell,
                 gpus[g].cells + cell,
                 gpus[peer].emptied,
                 gpus[g].emptied,
                 static_cast<unsigned>(c),
                 backoff_ns};
      check(cudaSetDevice(g), "cudaSetDevice");
      ll_call<<<1, threads, 0, gpus[g].stream>>>(a);
      check(cudaGetLastError(), "launch");
      if (host_pace && i == 0) spin_us(skew_us);
    }
    if (host_pace) spin_us(gap_us);
  }
  double slowest = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(cudaEventRecord(gpus[g].stop, gpus[g].stream), "record stop");
    while (cudaEventQuery(gpus[g].stop) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "ll_poll_probe: GPU %d did not finish %d calls of %zu bytes within 10 s\n", g, calls,
                     bytes);
        std::exit(1);
      }
    }
    float ms = 0;
    check(cudaEventElapsedTime(&ms, gpus[g].start, gpus[g].stop), "elapsed");
    slowest = std::max(slowest, 1000.0 * ms / calls);
    std::vector<float> out(bytes / sizeof(float));
    check(cudaMemcpy(out.data(), gpus[g].out, bytes, cudaMemcpyDeviceToHost), "download");
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] != 3.0f) {
        std::fprintf(stderr, "ll_poll_probe: GPU %d element %zu is %g, not 3 (%zu bytes, %d threads)\n", g, i,
                     static_cast<double>(out[i]), bytes, threads);
        std::exit(1);
      }
    }
  }
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 400;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
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
  Gpu gpus[kGpus];
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(cudaDeviceEnablePeerAccess(1 - g, 0), "cudaDeviceEnablePeerAccess");
    check(cudaMalloc(&gpus[g].in, max_bytes), "cudaMalloc in");
    check(cudaMalloc(&gpus[g].out, max_bytes), "cudaMalloc out");
    check(cudaMalloc(&gpus[g].cells, kDepth * (max_bytes / 8) * sizeof(uint4)), "cudaMalloc cells");
    check(cudaMalloc(&gpus[g].emptied, sizeof(unsigned)), "cudaMalloc emptied");
    check(cudaStreamCreateWithFlags(&gpus[g].stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&gpus[g].start), "cudaEventCreate");
    check(cudaEventCreate(&gpus[g].stop), "cudaEventCreate");
    std::vector<float> in(max_bytes / sizeof(float), static_cast<float>(g + 1));
    check(cudaMemcpy(gpus[g].in, in.data(), max_bytes, cudaMemcpyHostToDevice), "upload");
  }
  std::printf("# ll_poll_probe: GPUs 0 and 1, %d calls x %d repeats (median), host pace: %.1f us gap, %.1f us skew\n",
              calls, repeats, gap_us, skew_us);
  std::printf("# %8s %8s %10s %6s %12s\n", "bytes", "threads", "backoff_ns", "pace", "us_per_call");
  for (std::size_t bytes : sizes) {
    for (int threads : {1024, 256, 64}) {
      if (bytes / 8 > static_cast<std::size_t>(threads) * 64) continue;  // at most 64 lines per thread
      for (int backoff_ns : {0, 100, 500}) {
        for (bool host_pace : {false, true}) {
          std::vector<double> times;
          for (int r = 0; r < repeats; ++r) {
            times.push_back(run(gpus, bytes, max_bytes, threads, backoff_ns, host_pace, gap_us, skew_us, calls));
          }
          std::sort(times.begin(), times.end());
          std::printf("  %8zu %8d %10d %6s %12.2f   (min %.2f, max %.2f)\n", bytes, threads, backoff_ns,
                      host_pace ? "host" : "gpu", times[times.size() / 2], times.front(), times.back());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
