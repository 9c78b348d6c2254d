// copy_batch_probe: whether two copies issued together run on two copy engines at once, and what each way of
// issuing them costs. Copy A is a device-to-device copy inside GPU 0 (an allgather's own block); copy B goes from
// GPU 0 to GPU 1 when there are two GPUs with peer access (the block for the peer), else inside GPU 0 too.
//
//   A alone, B alone        one cudaMemcpyAsync on one stream
//   A;B one stream          both on one stream, in order (pickle's two-rank allgather since 2026-11-24)
//   batch(A,B)              one cudaMemcpyBatchAsync of both (CUDA 12.8+: the copies of a batch are unordered)
//   A|B two streams         A on a side stream forked from the main one and joined back (event, wait, event, wait)
//   batch(B in 4)           B alone, cut into 4 pieces in one batch: does a batch spread one copy over engines?
//
// Every stream is held at a gate until all work is enqueued, so enqueueing is not timed; `calls` iterations per
// repeat, median of `repeats` repeats, us per iteration (CUDA events on the main stream). Host us per iteration to
// enqueue are printed beside (the API calls' cost). Not part of pickle: a measurement tool (docs/results).
//
// Usage: copy_batch_probe [calls=20] [repeats=7] [bytes...=1M 4M 16M 64M 256M]
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


enum class Variant { AAlone, BAlone, Sequential, Batch, TwoStreams, BatchSplit };
constexpr struct {
  Variant variant;
  const char* name;
} kVariants[] = {{Variant::AAlone, "A alone"},         {Variant::BAlone, "B alone"},
                 {Variant::Sequential, "A;B one stream"}, {Variant::Batch, "batch(A,B)"},
                 {Variant::TwoStreams, "A|B two streams"}, {Variant::BatchSplit, "batch(B in 4)"}};

/// One cudaMemcpyBatchAsync of `count` copies, all in stream order.
void batch(void* const* dsts, const void* const* srcs, const std::size_t* sizes, std::size_t count, cudaStream_t s) {
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t first = 0;
  check(cudaMemcpyBatchAsync(dsts, srcs, sizes, count, &attributes, &first, 1, s), "cudaMemcpyBatchAsync");
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 20;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  std::vector<std::size_t> sizes;
  for (int i = 3; i < argc; ++i) sizes.push_back(probe::parse_bytes(argv[i]));
  if (sizes.empty()) sizes = {1u << 20, 4u << 20, 16u << 20, 64u << 20, 256u << 20};
  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());

  int gpus = 0;
  check(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
  int peer_access = 0;
  if (gpus > 1) check(cudaDeviceCanAccessPeer(&peer_access, 0, 1), "cudaDeviceCanAccessPeer");
  const bool peer = gpus > 1 && peer_access != 0;
  check(cudaSetDevice(0), "cudaSetDevice");
  if (peer) check(cudaDeviceEnablePeerAccess(1, 0), "cudaDeviceEnablePeerAccess");
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");

  char *src = nullptr, *dst_a = nullptr, *dst_b = nullptr;
  check(cudaMalloc(&src, largest), "cudaMalloc");
  check(cudaMalloc(&dst_a, largest), "cudaMalloc");
  if (peer) {
    check(cudaSetDevice(1), "cudaSetDevice");
    check(cudaMalloc(&dst_b, largest), "cudaMalloc");
    check(cudaSetDevice(0), "cudaSetDevice");
  } else {
    check(cudaMalloc(&dst_b, largest), "cudaMalloc");
  }
  unsigned* gate = nullptr;
  check(cudaHostAlloc(&gate, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  cudaStream_t main_stream, side;
  check(cudaStreamCreateWithFlags(&main_stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t fork, join, start, stop;
  check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");

  std::printf("# copy_batch_probe: A = GPU 0 -> GPU 0, B = %s; %d calls x %d repeats, median\n",
              peer ? "GPU 0 -> GPU 1 (peer access)" : "GPU 0 -> GPU 0 (one GPU)", calls, repeats);
  std::printf("# us per iteration, stream time (host enqueue us in brackets)\n");
  std::printf("%-18s", "bytes per copy");
  for (std::size_t bytes : sizes) std::printf("%22zu", bytes);
  std::printf("\n");
  for (const auto& [variant, name] : kVariants) {
    std::printf("%-18s", name);
    for (std::size_t bytes : sizes) {
      std::vector<float> stream_us, host_us;
      for (int repeat = 0; repeat < repeats; ++repeat) {
        *gate = 0;
        check(wait_value(main_stream, reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
        check(cudaEventRecord(start, main_stream), "cudaEventRecord");
        const auto host_start = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) {
          switch (variant) {
            case Variant::AAlone:
              check(cudaMemcpyAsync(dst_a, src, bytes, cudaMemcpyDefault, main_stream), "copy A");
              break;
            case Variant::BAlone:
              check(cudaMemcpyAsync(dst_b, src, bytes, cudaMemcpyDefault, main_stream), "copy B");
              break;
            case Variant::Sequential:
              check(cudaMemcpyAsync(dst_a, src, bytes, cudaMemcpyDefault, main_stream), "copy A");
              check(cudaMemcpyAsync(dst_b, src, bytes, cudaMemcpyDefault, main_stream), "copy B");
              break;
            case Variant::Batch: {
              void* dsts[2] = {dst_a, dst_b};
              const void* srcs[2] = {src, src};
              const std::size_t lengths[2] = {bytes, bytes};
              batch(dsts, srcs, lengths, 2, main_stream);
              break;
            }
            case Variant::TwoStreams:
              check(cudaEventRecord(fork, main_stream), "cudaEventRecord");
              check(cudaStreamWaitEvent(side, fork, 0), "cudaStreamWaitEvent");
              check(cudaMemcpyAsync(dst_a, src, bytes, cudaMemcpyDefault, side), "copy A");
              check(cudaEventRecord(join, side), "cudaEventRecord");
              check(cudaMemcpyAsync(dst_b, src, bytes, cudaMemcpyDefault, main_stream), "copy B");
              check(cudaStreamWaitEvent(main_stream, join, 0), "cudaStreamWaitEvent");
              break;
            case Variant::BatchSplit: {
              const std::size_t piece = (bytes / 4 + 255) / 256 * 256;
              void* dsts[4];
              const void* srcs[4];
              std::size_t lengths[4];
              std::size_t count = 0;
              for (std::size_t at = 0; at < bytes; at += piece, ++count) {
                dsts[count] = dst_b + at;
                srcs[count] = src + at;
                lengths[count] = std::min(piece, bytes - at);
              }
              batch(dsts, srcs, lengths, count, main_stream);
              break;
            }
          }
        }
        const double host = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start).count();
        check(cudaEventRecord(stop, main_stream), "cudaEventRecord");
        __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        stream_us.push_back(ms * 1000.f / static_cast<float>(calls));
        host_us.push_back(static_cast<float>(host / calls));
      }
      std::sort(stream_us.begin(), stream_us.end());
      std::sort(host_us.begin(), host_us.end());
      const std::string cell = std::to_string(stream_us[stream_us.size() / 2]).substr(0, 8) + " (" +
                               std::to_string(host_us[host_us.size() / 2]).substr(0, 5) + ")";
      std::printf("%22s", cell.c_str());
    }
    std::printf("\n");
  }
  return 0;
}
