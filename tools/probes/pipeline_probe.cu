// pipeline_probe: pickle's chunked reduce_scatter pipeline (src/collectives/pipeline.cpp) rebuilt from raw CUDA in one
// process, every dependency on the GPUs (events) and none through a host: how fast can that schedule go at all?
// On four H200s pickle's reduce_scatter moves about 225 GB/s busbw where the in-place alltoall, the same pipeline
// with a copy-engine consumer, moves about 330; the reduction kernel does not slow the copies beside it
// (copy_under_reduce_probe) and 8-32 CTAs change nothing (docs/results/2026-11-28f-h200x4.md). If this probe reaches
// the alltoall's rate with the reduction, pickle's host plumbing costs the difference; if not, the schedule does.
//
// Per GPU r of n (all GPUs of the machine, peer access between all), `calls` calls back to back, each:
//   side stream: for each chunk k, for s = 1..n-1: peer p = (r+s)%n: wait until p has consumed the chunk that last
//                used the scratch stage (4 stages, as pickle), copy chunk k of block p into p's stage slot for r
//   main stream: for each chunk k: wait for chunk k from every peer, then consume it: `reduce` (pickle's kernel,
//                `ctas` CTAs, f32 sum of the own block's chunk and the n-1 slots into the output) or `copy` (n-1
//                copy-engine copies out of the slots, the in-place alltoall's consumer)
//   fork=1: at a call's start the side stream waits for the main stream (pickle: the send buffer's producer is the
//   caller's stream), so the previous call's last consumption delays the next call's first copies; fork=0: no wait.
//   self=D: before chunk m's copies the side stream also waits for this GPU's own consumption of chunk m - D: pickle's
//   host queues chunk m's sends only once it saw its reduction m - 3 done (D=3; m - 2 before 2026-11-28f: D=2), a
//   wait through the host that this models without the host's latency; self=0: no such wait (the schedule's own
//   limit: only the receivers' stage reuse holds the copies back).
//   ordered=1 (3 GPUs or more): each copy into a peer also waits for the copy into that peer just before it in the
//   schedule (PICKLE_PIPELINE_SCHEDULE=ordered's tokens, as events).
//   The copy consumer waits for the GPU's own copies of chunk k first, as the in-place alltoall's copies into place do.
// Streams wait at a gate until the first chunks are queued. Time per call = (end - start) / calls on the slowest
// GPU, busbw as nccl-tests' reduce_scatter (size = n x block). Then the timeline of GPU 0's second call: when each
// chunk's copies were done on its side stream and its consumption on its main stream (ms after chunk 0's copies). The
// reduction's output is checked: GPU r's source holds (r + 1) (1 + k % 8) in chunk k of every block, so every sum is
// n (n + 1) / 2 (1 + k % 8), and a chunk reduced from a stage that still held chunk k - 4 shows.
//
// Usage: pipeline_probe [block=512M] [chunk=64M] [consumer=reduce|copy] [ctas=8] [fork=1] [self=0] [ordered=0]
//                       [calls=3] [repeats=3]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/reduce.hpp"
#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;
using probe::elapsed_ms;

constexpr int kStages = 4;  // pickle's kStages (src/collectives/plumbing.hpp)
constexpr std::size_t kGateChunks = 16;  // chunks queued before the gate opens

struct Gpu {
  char* source = nullptr;   // n blocks: block p goes to GPU p
  char* scratch = nullptr;  // kStages x (n - 1) slots of a chunk
  char* output = nullptr;   // one block
  cudaStream_t side = nullptr, main = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr, forked = nullptr;
  std::vector<cudaEvent_t> consumed;                // per global chunk g (calls x chunks): main stream, after consuming
  std::vector<std::vector<cudaEvent_t>> sent_to;    // [g][peer]: side stream, after the copy to that peer
  std::vector<cudaEvent_t> sent_time, consumed_time;  // timing events of the timeline's call
};

cudaEvent_t ordering_event() {
  cudaEvent_t e;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}

cudaEvent_t timing_event() {
  cudaEvent_t e;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t block = argc > 1 ? probe::parse_bytes(argv[1]) : std::size_t{512} << 20;
  const std::size_t chunk_arg = argc > 2 ? probe::parse_bytes(argv[2]) : std::size_t{64} << 20;
  const std::string consumer = argc > 3 ? argv[3] : "reduce";
  const int ctas = argc > 4 ? std::atoi(argv[4]) : 8;
  const bool fork = argc > 5 ? std::atoi(argv[5]) != 0 : true;
  const int self_lag = argc > 6 ? std::atoi(argv[6]) : 0;
  const bool ordered = argc > 7 ? std::atoi(argv[7]) != 0 : false;
  const int calls = argc > 8 ? std::atoi(argv[8]) : 3;
  const int repeats = argc > 9 ? std::atoi(argv[9]) : 3;
  const std::size_t chunk = std::min(chunk_arg, block);
  if (block == 0 || block % 16 != 0 || chunk == 0 || chunk % 16 != 0 || (consumer != "reduce" && consumer != "copy") ||
      ctas < 1 || self_lag < 0 || calls < 2 || repeats < 1) {
    std::fprintf(stderr, "usage: pipeline_probe [block=512M] [chunk=64M] [consumer=reduce|copy] [ctas=8] [fork=1] "
                         "[self=0] [ordered=0] [calls=3, at least 2] [repeats=3] (block and chunk multiples of 16)\n");
    return 2;
  }
  const int n = probe::gpus_at_least(2);
  if (n == 0) return 0;
  const bool reduce = consumer == "reduce";
  const std::size_t chunks = (block + chunk - 1) / chunk;
  const std::size_t total_chunks = chunks * static_cast<std::size_t>(calls);
  const auto slot_index = [](int r, int p) { return p < r ? p : p - 1; };  // GPU r's slot for peer p's chunks
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  unsigned* gate = probe::mapped_gate();

  std::vector<Gpu> gpus(static_cast<std::size_t>(n));
  std::vector<float> host_values(block / 4);
  for (int r = 0; r < n; ++r) {
    Gpu& g = gpus[static_cast<std::size_t>(r)];
    check(cudaSetDevice(r), "cudaSetDevice");
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      const cudaError_t status = cudaDeviceEnablePeerAccess(p, 0);
      if (status != cudaSuccess && status != cudaErrorPeerAccessAlreadyEnabled) check(status, "peer access");
      (void)cudaGetLastError();
    }
    check(cudaMalloc(&g.source, static_cast<std::size_t>(n) * block), "cudaMalloc");
    for (std::size_t i = 0; i < host_values.size(); ++i) {
      host_values[i] = static_cast<float>((r + 1) * (1 + static_cast<int>(i * 4 / chunk % 8)));
    }
    for (int p = 0; p < n; ++p) {
      check(cudaMemcpy(g.source + static_cast<std::size_t>(p) * block, host_values.data(), block,
                       cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    check(cudaMalloc(&g.scratch, static_cast<std::size_t>(kStages) * (n - 1) * chunk), "cudaMalloc");
    check(cudaMalloc(&g.output, block), "cudaMalloc");
    check(cudaStreamCreateWithFlags(&g.side, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&g.main, cudaStreamNonBlocking), "cudaStreamCreate");
    g.start = timing_event();
    g.stop = timing_event();
    g.forked = ordering_event();
    g.consumed.resize(total_chunks);
    for (auto& e : g.consumed) e = ordering_event();
    g.sent_to.assign(total_chunks, std::vector<cudaEvent_t>(static_cast<std::size_t>(n)));
    for (auto& row : g.sent_to) {
      for (auto& e : row) e = ordering_event();
    }
    g.sent_time.resize(chunks);
    g.consumed_time.resize(chunks);
    for (auto& e : g.sent_time) e = timing_event();
    for (auto& e : g.consumed_time) e = timing_event();
    pickle::coll::load_reduce_kernels(r);
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# pipeline_probe on %d x %s: blocks of %zu B in %zu chunks of %zu B, consumer %s%s, fork %d, self %d, "
              "ordered %d, %d calls, median of %d\n", n, prop.name, block, chunks, chunk, consumer.c_str(),
              reduce ? (" (" + std::to_string(ctas) + " CTAs)").c_str() : "", fork ? 1 : 0, self_lag, ordered ? 1 : 0,
              calls, repeats);

  const int timeline_call = 1;
  std::vector<double> per_call_us;
  for (int repeat = 0; repeat < repeats + 1; ++repeat) {  // the first is a warm-up
    __atomic_store_n(gate, 0u, __ATOMIC_RELEASE);
    for (int r = 0; r < n; ++r) {
      Gpu& g = gpus[static_cast<std::size_t>(r)];
      check(cudaSetDevice(r), "cudaSetDevice");
      for (cudaStream_t s : {g.side, g.main}) {
        check(wait_value(s, reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
      }
      check(cudaEventRecord(g.start, g.main), "cudaEventRecord");
    }
    for (int call = 0; call < calls; ++call) {
      if (fork) {
        for (int r = 0; r < n; ++r) {
          Gpu& g = gpus[static_cast<std::size_t>(r)];
          check(cudaSetDevice(r), "cudaSetDevice");
          check(cudaEventRecord(g.forked, g.main), "cudaEventRecord");
          check(cudaStreamWaitEvent(g.side, g.forked, 0), "cudaStreamWaitEvent");
        }
      }
      for (std::size_t k = 0; k < chunks; ++k) {
        const std::size_t global = static_cast<std::size_t>(call) * chunks + k;
        const int stage = static_cast<int>(global % kStages);
        const std::size_t offset = k * chunk, length = std::min(chunk, block - offset);
        // Once the first chunks are queued the gate opens and the host queues the rest while the GPUs run (it queues
        // a chunk in well under the chunk's copy time): no stream holds hundreds of operations behind a closed gate.
        if (global == std::min<std::size_t>(kGateChunks, total_chunks - 1)) {
          __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
        }
        // Every GPU's copies of chunk k, step by step (so that with `ordered` the copy a step waits for, of the
        // step before, was queued already: a wait on an event never recorded would not wait).
        for (int s = 1; s < n; ++s) {
          for (int r = 0; r < n; ++r) {
            Gpu& g = gpus[static_cast<std::size_t>(r)];
            check(cudaSetDevice(r), "cudaSetDevice");
            if (s == 1 && self_lag > 0 && global >= static_cast<std::size_t>(self_lag)) {
              check(cudaStreamWaitEvent(g.side, g.consumed[global - static_cast<std::size_t>(self_lag)], 0), "wait");
            }
            const int p = (r + s) % n;
            Gpu& peer = gpus[static_cast<std::size_t>(p)];
            if (global >= kStages) check(cudaStreamWaitEvent(g.side, peer.consumed[global - kStages], 0), "wait");
            if (ordered && n > 2) {
              // The copy into p just before this one: rank r + 1's at step s - 1, or rank r + 2's at step n - 1 of
              // the chunk before (none for a call's first chunk, as pickle's tokens).
              if (s > 1) {
                check(cudaStreamWaitEvent(g.side, gpus[static_cast<std::size_t>((r + 1) % n)].sent_to[global][
                                                      static_cast<std::size_t>(p)], 0), "wait");
              } else if (k > 0) {
                check(cudaStreamWaitEvent(g.side, gpus[static_cast<std::size_t>((r + 2) % n)].sent_to[global - 1][
                                                      static_cast<std::size_t>(p)], 0), "wait");
              }
            }
            char* slot = peer.scratch + (static_cast<std::size_t>(stage) * (n - 1) + slot_index(p, r)) * chunk;
            check(cudaMemcpyPeerAsync(slot, p, g.source + static_cast<std::size_t>(p) * block + offset, r, length,
                                      g.side), "cudaMemcpyPeerAsync");
            check(cudaEventRecord(g.sent_to[global][static_cast<std::size_t>(p)], g.side), "cudaEventRecord");
            if (s == n - 1 && call == timeline_call) check(cudaEventRecord(g.sent_time[k], g.side), "cudaEventRecord");
          }
        }
        for (int r = 0; r < n; ++r) {  // every GPU's consumption of chunk k
          Gpu& g = gpus[static_cast<std::size_t>(r)];
          check(cudaSetDevice(r), "cudaSetDevice");
          for (int p = 0; p < n; ++p) {
            if (p == r) continue;
            check(cudaStreamWaitEvent(g.main, gpus[static_cast<std::size_t>(p)].sent_to[global][
                                                  static_cast<std::size_t>(r)], 0), "wait");
          }
          auto slot_of = [&](int p) {
            return g.scratch + (static_cast<std::size_t>(stage) * (n - 1) + slot_index(r, p)) * chunk;
          };
          if (reduce) {
            pickle::coll::ReduceTask task;
            task.type = pickle::DataType::F32;
            task.op = pickle::ReduceOp::Sum;
            task.nranks = n;
            task.out = g.output + offset;
            task.count = length / 4;
            task.ninputs = n;
            for (int p = 0; p < n; ++p) {
              task.inputs[p] = p == r ? g.source + static_cast<std::size_t>(r) * block + offset : slot_of(p);
            }
            pickle::coll::launch_reduce_cuda(task, g.main, r, ctas);
          } else {
            check(cudaStreamWaitEvent(g.main, g.sent_to[global][static_cast<std::size_t>((r + n - 1) % n)], 0),
                  "wait");
            for (int p = 0; p < n; ++p) {
              if (p == r) continue;
              // Into the output block's chunk (one destination for all peers: a timing consumer, like the
              // in-place alltoall's copies into place, not a result).
              check(cudaMemcpyAsync(g.output + offset, slot_of(p), length, cudaMemcpyDeviceToDevice, g.main),
                    "cudaMemcpyAsync");
            }
          }
          check(cudaEventRecord(g.consumed[global], g.main), "cudaEventRecord");
          if (call == timeline_call) check(cudaEventRecord(g.consumed_time[k], g.main), "cudaEventRecord");
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      Gpu& g = gpus[static_cast<std::size_t>(r)];
      check(cudaSetDevice(r), "cudaSetDevice");
      check(cudaStreamWaitEvent(g.main, g.sent_to[total_chunks - 1][static_cast<std::size_t>((r + n - 1) % n)], 0),
            "wait");
      check(cudaEventRecord(g.stop, g.main), "cudaEventRecord");
    }
    double slowest_ms = 0;
    for (int r = 0; r < n; ++r) {
      check(cudaSetDevice(r), "cudaSetDevice");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      slowest_ms = std::max(slowest_ms, static_cast<double>(elapsed_ms(gpus[static_cast<std::size_t>(r)].start,
                                                                       gpus[static_cast<std::size_t>(r)].stop)));
    }
    if (repeat > 0) per_call_us.push_back(slowest_ms * 1e3 / calls);
  }
  std::sort(per_call_us.begin(), per_call_us.end());
  const double us = per_call_us[per_call_us.size() / 2];
  const double size = static_cast<double>(n) * static_cast<double>(block);
  std::printf("time per call %.1f us (min %.1f, max %.1f)  algbw %.1f GB/s  busbw %.1f GB/s\n", us,
              per_call_us.front(), per_call_us.back(), size / (us * 1e3), size / (us * 1e3) * (n - 1) / n);

  // GPU 0's timeline in the second call of the last repeat, relative to the end of that call's chunk 0 copies.
  Gpu& g0 = gpus[0];
  check(cudaSetDevice(0), "cudaSetDevice");
  std::printf("# GPU 0, call %d: ms after chunk 0's copies were done: copies of chunk k done | chunk k consumed\n",
              timeline_call + 1);
  for (std::size_t k = 0; k < chunks; ++k) {
    std::printf("chunk %3zu  copies %8.3f  consumed %8.3f\n", k, elapsed_ms(g0.sent_time[0], g0.sent_time[k]),
                elapsed_ms(g0.sent_time[0], g0.consumed_time[k]));
  }
  int failures = 0;
  if (reduce) {
    for (int r = 0; r < n; ++r) {
      check(cudaSetDevice(r), "cudaSetDevice");
      check(cudaMemcpy(host_values.data(), gpus[static_cast<std::size_t>(r)].output, block, cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < host_values.size(); ++i) {
        const int factor = 1 + static_cast<int>(i * 4 / chunk % 8);
        wrong += host_values[i] != static_cast<float>(n * (n + 1) / 2 * factor);
      }
      if (wrong != 0) {
        std::printf("GPU %d: %zu of %zu output elements are not the sum of their chunk\n", r, wrong,
                    host_values.size());
        ++failures;
      }
    }
    std::printf("#wrong GPUs: %d\n", failures);
  }
  return failures == 0 ? 0 : 1;
}
