// copy_pattern_probe: the copy patterns of pickle's collectives on N GPUs, with nothing of pickle around them: raw
// cudaMemcpyPeerAsync between the GPUs of one process, every GPU's streams held at a gate until all is enqueued.
// On four H200s pickle's chunked patterns (reduce_scatter, alltoall) stopped at about 225 GB/s busbw while its
// whole-block staggered allgather reached 377 (docs/results/2026-11-28c-h200x4.md): is that the switch's answer to
// these patterns, or pickle's plumbing?
//
// Patterns, per GPU r (n GPUs, blocks of `block` bytes cut into chunks of `chunk`):
//   alltoall staggered   one stream: for each chunk c, for s = 1..n-1: block (r+s)%n's chunk c to GPU (r+s)%n
//   alltoall parallel    a stream per peer p: its block's chunks to p, in order
//   allgather staggered  one stream: for s = 1..n-1: the same source block (r's own) to GPU (r+s)%n, chunk by chunk
// each also "+flag": after every copy a stream write-value of a pinned host word (pickle's completion write).
// Time: host clock from opening the gates to the end of every stream; busbw = n * block / t * (n-1)/n (nccl-tests'
// alltoall and allgather factor, size = n * block). Median of `repeats`.
//
// Usage: copy_pattern_probe [block=512M] [chunks=64M,512M] [repeats=5]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;


enum class Pattern { AlltoallStaggered, AlltoallParallel, AllgatherStaggered };
constexpr struct {
  Pattern pattern;
  const char* name;
} kPatterns[] = {{Pattern::AlltoallStaggered, "alltoall staggered"},
                 {Pattern::AlltoallParallel, "alltoall parallel"},
                 {Pattern::AllgatherStaggered, "allgather staggered"}};

struct Gpu {
  char* src = nullptr;  // n blocks: block p goes to GPU p (alltoall); block 0 is the allgather's own block
  char* dst = nullptr;  // n blocks: block q comes from GPU q
  std::vector<cudaStream_t> streams;  // [0]: the staggered stream; [p]: the parallel stream to peer p
};

}  // namespace

int main(int argc, char** argv) {
  const std::size_t block = argc > 1 ? probe::parse_bytes(argv[1]) : std::size_t{512} << 20;
  const std::vector<std::size_t> chunks = probe::parse_byte_list(argc > 2 ? argv[2] : "64M,512M");
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  const int n = probe::gpus_at_least(2);
  if (n == 0) return 0;
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  const probe::StreamValueOp write_value = probe::stream_value_op("cuStreamWriteValue32");
  unsigned* gate = probe::mapped_gate();
  unsigned* words = nullptr;  // one completion word per GPU, as pickle's host-memory words
  check(cudaHostAlloc(&words, static_cast<std::size_t>(n) * sizeof(unsigned),
                      cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
  std::vector<Gpu> gpus(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    check(cudaSetDevice(r), "cudaSetDevice");
    for (int p = 0; p < n; ++p) {
      if (p != r) {
        const cudaError_t status = cudaDeviceEnablePeerAccess(p, 0);
        if (status != cudaSuccess && status != cudaErrorPeerAccessAlreadyEnabled) check(status, "peer access");
        (void)cudaGetLastError();
      }
    }
    Gpu& g = gpus[static_cast<std::size_t>(r)];
    check(cudaMalloc(&g.src, static_cast<std::size_t>(n) * block), "cudaMalloc");
    check(cudaMalloc(&g.dst, static_cast<std::size_t>(n) * block), "cudaMalloc");
    g.streams.resize(static_cast<std::size_t>(n));
    for (auto& s : g.streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  std::printf("# copy_pattern_probe: %d GPUs, blocks of %zu B, median of %d; busbw GB/s (1e9 B/s)\n", n, block,
              repeats);
  unsigned generation = 0;
  for (std::size_t chunk : chunks) {
    if (chunk == 0 || chunk > block) continue;
    const std::size_t pieces = (block + chunk - 1) / chunk;
    for (const auto& [pattern, name] : kPatterns) {
      for (int flag = 0; flag < 2; ++flag) {
        std::vector<double> rates;
        for (int repeat = 0; repeat < repeats; ++repeat) {
          ++generation;
          __atomic_store_n(gate, 0u, __ATOMIC_RELEASE);
          for (int r = 0; r < n; ++r) {
            check(cudaSetDevice(r), "cudaSetDevice");
            Gpu& g = gpus[static_cast<std::size_t>(r)];
            for (auto& s : g.streams) {
              check(wait_value(s, reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
            }
            auto copy = [&](cudaStream_t s, int peer, std::size_t piece, bool own_block) {
              const std::size_t offset = piece * chunk;
              const std::size_t bytes = std::min(chunk, block - offset);
              const char* from = g.src + (own_block ? 0 : static_cast<std::size_t>(peer) * block) + offset;
              char* to = gpus[static_cast<std::size_t>(peer)].dst + static_cast<std::size_t>(r) * block + offset;
              check(cudaMemcpyPeerAsync(to, peer, from, r, bytes, s), "cudaMemcpyPeerAsync");
              if (flag != 0) {
                check(write_value(s, reinterpret_cast<CUdeviceptr>(words + r), generation, 0), "write value");
              }
            };
            switch (pattern) {
              case Pattern::AlltoallStaggered:
                for (std::size_t c = 0; c < pieces; ++c) {
                  for (int s = 1; s < n; ++s) copy(g.streams[0], (r + s) % n, c, false);
                }
                break;
              case Pattern::AlltoallParallel:
                for (int p = 0; p < n; ++p) {
                  if (p == r) continue;
                  for (std::size_t c = 0; c < pieces; ++c) copy(g.streams[static_cast<std::size_t>(p)], p, c, false);
                }
                break;
              case Pattern::AllgatherStaggered:
                for (int s = 1; s < n; ++s) {
                  for (std::size_t c = 0; c < pieces; ++c) copy(g.streams[0], (r + s) % n, c, true);
                }
                break;
            }
          }
          const auto start = std::chrono::steady_clock::now();
          __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
          for (int r = 0; r < n; ++r) {
            check(cudaSetDevice(r), "cudaSetDevice");
            check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
          }
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const double size = static_cast<double>(n) * static_cast<double>(block);
          rates.push_back(size / seconds * (n - 1) / n / 1e9);
        }
        std::sort(rates.begin(), rates.end());
        std::printf("%-20s chunk %10zu %-6s busbw %8.1f  (min %.1f max %.1f)\n", name, chunk, flag ? "+flag" : "",
                    rates[rates.size() / 2], rates.front(), rates.back());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
