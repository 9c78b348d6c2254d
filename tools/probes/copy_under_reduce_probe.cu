// copy_under_reduce_probe: does the collectives' reduction kernel slow the copy engine's peer copies?
// On four H200s pickle's reduce_scatter (peer copies into scratch, then the reduction kernel on each chunk) moves
// about 225 GB/s busbw where the in-place alltoall, the same pipeline with a copy-engine copy into place as the
// consumer of each chunk, moves about 330, and 8, 16 or 32 reduction CTAs change nothing
// (docs/results/2026-11-28f-h200x4.md). If a memory-bound kernel on either GPU slows the copies that run beside it,
// that is the reduce_scatter's limit.
//
// GPU 0 copies `copies` pieces of `chunk` bytes into GPU 1 (cudaMemcpyPeerAsync on a stream of GPU 0, as pickle's
// ipc sends; into a ring of 4 slots), "uni"; with "bi" GPU 1 copies into GPU 0 at the same time. First the copies
// alone, then beside a consumer that runs back to back on one GPU or on both for at least as long:
//   reduce ctas C   pickle's reduction kernel (src/collectives/reduce_cuda.cu, from libpickle): f32 sum of `inputs`
//                   local buffers of `chunk` bytes into a local output
//   local copy      cudaMemcpyAsync of `chunk` bytes inside the GPU (the in-place alltoall's consumer)
// Every stream waits at a gate (a host word) until all is queued. Copy GB/s = bytes / the copy stream's event time,
// per direction; "of alone" against the copies alone; the consumer's GB/s (output bytes per second) over its whole
// loop, and "overlap yes" when that loop lasted at least as long as the copies (so it covered them). Median of
// `repeats`.
//
// Usage: copy_under_reduce_probe [chunk=64M] [copies=32] [inputs=4] [ctas=8,32] [repeats=5]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/reduce.hpp"
#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;
using probe::elapsed_ms;

constexpr int kSlots = 4;  // the copies' ring of destination slots on the peer

struct Gpu {
  int device = 0;
  char* source = nullptr;  // what this GPU copies to its peer
  char* slots = nullptr;   // kSlots x chunk: where the peer's copies land
  std::vector<void*> inputs;
  char* output = nullptr;
  cudaStream_t copy_stream = nullptr, consumer_stream = nullptr;
  cudaEvent_t copy_start = nullptr, copy_stop = nullptr, consumer_start = nullptr, consumer_stop = nullptr;
};

struct Consumer {
  std::string name;
  int ctas = 0;  // 0: a local copy; else a reduction with this many CTAs
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t chunk = argc > 1 ? probe::parse_bytes(argv[1]) : std::size_t{64} << 20;
  const int copies = argc > 2 ? std::atoi(argv[2]) : 32;
  const int inputs = argc > 3 ? std::atoi(argv[3]) : 4;
  const std::vector<int> budgets = probe::parse_ints(argc > 4 ? argv[4] : "8,32");
  const int repeats = argc > 5 ? std::atoi(argv[5]) : 5;
  if (chunk == 0 || chunk % 16 != 0 || copies < 1 || repeats < 1 || inputs < 1 ||
      inputs > pickle::coll::kMaxReduceInputs) {
    std::fprintf(stderr, "usage: copy_under_reduce_probe [chunk=64M, a multiple of 16] [copies=32] [inputs=4, 1-%d] "
                         "[ctas=8,32] [repeats=5]\n", pickle::coll::kMaxReduceInputs);
    return 2;
  }
  if (probe::gpus_at_least(2) == 0) return 0;  // it uses GPUs 0 and 1
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  unsigned* gate = probe::mapped_gate();
  Gpu gpus[2];
  for (int g = 0; g < 2; ++g) {
    Gpu& gpu = gpus[g];
    gpu.device = g;
    check(cudaSetDevice(g), "cudaSetDevice");
    const cudaError_t status = cudaDeviceEnablePeerAccess(1 - g, 0);
    if (status != cudaSuccess && status != cudaErrorPeerAccessAlreadyEnabled) check(status, "peer access");
    (void)cudaGetLastError();
    check(cudaMalloc(&gpu.source, chunk), "cudaMalloc");
    check(cudaMemset(gpu.source, 1, chunk), "cudaMemset");
    check(cudaMalloc(&gpu.slots, kSlots * chunk), "cudaMalloc");
    gpu.inputs.resize(static_cast<std::size_t>(inputs));
    for (auto& p : gpu.inputs) {
      check(cudaMalloc(&p, chunk), "cudaMalloc");
      check(cudaMemset(p, 0, chunk), "cudaMemset");  // f32 zeros: the sum stays finite
    }
    check(cudaMalloc(&gpu.output, chunk), "cudaMalloc");
    check(cudaStreamCreateWithFlags(&gpu.copy_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&gpu.consumer_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    for (cudaEvent_t* e : {&gpu.copy_start, &gpu.copy_stop, &gpu.consumer_start, &gpu.consumer_stop}) {
      check(cudaEventCreate(e), "cudaEventCreate");
    }
    pickle::coll::load_reduce_kernels(g);
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# copy_under_reduce_probe on 2 x %s: %d copies of %zu B per direction, reduction f32 sum of %d "
              "inputs of %zu B, median of %d; GB/s = 1e9 B/s\n", prop.name, copies, chunk, inputs, chunk, repeats);

  auto enqueue_consumer = [&](Gpu& gpu, const Consumer& consumer, int launches) {
    check(cudaEventRecord(gpu.consumer_start, gpu.consumer_stream), "cudaEventRecord");
    for (int l = 0; l < launches; ++l) {
      if (consumer.ctas == 0) {
        check(cudaMemcpyAsync(gpu.output, gpu.inputs[0], chunk, cudaMemcpyDeviceToDevice, gpu.consumer_stream),
              "cudaMemcpyAsync");
      } else {
        pickle::coll::ReduceTask task;
        task.type = pickle::DataType::F32;
        task.op = pickle::ReduceOp::Sum;
        task.nranks = inputs;
        task.out = gpu.output;
        task.count = chunk / 4;
        task.ninputs = inputs;
        std::copy(gpu.inputs.begin(), gpu.inputs.end(), task.inputs);
        pickle::coll::launch_reduce_cuda(task, gpu.consumer_stream, gpu.device, consumer.ctas);
      }
    }
    check(cudaEventRecord(gpu.consumer_stop, gpu.consumer_stream), "cudaEventRecord");
  };
  auto enqueue_copies = [&](Gpu& from, Gpu& to) {
    check(cudaEventRecord(from.copy_start, from.copy_stream), "cudaEventRecord");
    for (int c = 0; c < copies; ++c) {
      check(cudaMemcpyPeerAsync(to.slots + static_cast<std::size_t>(c % kSlots) * chunk, to.device, from.source,
                                from.device, chunk, from.copy_stream), "cudaMemcpyPeerAsync");
    }
    check(cudaEventRecord(from.copy_stop, from.copy_stream), "cudaEventRecord");
  };
  // One run: the streams wait at the gate, everything is queued, the gate opens, all finish.
  auto run = [&](bool bi, const Consumer* consumer, const bool on[2], int launches, double* copy_gbps,
                 double* consumer_gbps, bool* covered) {
    __atomic_store_n(gate, 0u, __ATOMIC_RELEASE);
    for (Gpu& gpu : gpus) {
      check(cudaSetDevice(gpu.device), "cudaSetDevice");
      for (cudaStream_t s : {gpu.copy_stream, gpu.consumer_stream}) {
        check(wait_value(s, reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
      }
      const bool sends = gpu.device == 0 || bi;
      if (sends) enqueue_copies(gpu, gpus[1 - gpu.device]);
      if (consumer != nullptr && on[gpu.device]) enqueue_consumer(gpu, *consumer, launches);
    }
    __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
    for (Gpu& gpu : gpus) {
      check(cudaSetDevice(gpu.device), "cudaSetDevice");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    double copy_ms = 0, consumer_ms = 0;
    int directions = 0, consumers = 0;
    for (Gpu& gpu : gpus) {
      if (gpu.device == 0 || bi) {
        copy_ms += elapsed_ms(gpu.copy_start, gpu.copy_stop);
        ++directions;
      }
      if (consumer != nullptr && on[gpu.device]) {
        consumer_ms = std::max(consumer_ms, static_cast<double>(elapsed_ms(gpu.consumer_start, gpu.consumer_stop)));
        ++consumers;
      }
    }
    const double copy_mean_ms = directions > 0 ? copy_ms / directions : 0;
    if (copy_gbps != nullptr) *copy_gbps = static_cast<double>(copies) * chunk / (copy_mean_ms * 1e6);
    if (consumer_gbps != nullptr && consumers > 0) {
      *consumer_gbps = static_cast<double>(launches) * chunk / (consumer_ms * 1e6);
    }
    if (covered != nullptr) {
      // The shortest consumer loop must outlast the longest copy stream.
      double shortest = 1e300, longest = 0;
      for (Gpu& gpu : gpus) {
        if (consumer != nullptr && on[gpu.device]) {
          shortest = std::min(shortest, static_cast<double>(elapsed_ms(gpu.consumer_start, gpu.consumer_stop)));
        }
        if (gpu.device == 0 || bi) longest = std::max(longest, static_cast<double>(elapsed_ms(gpu.copy_start,
                                                                                               gpu.copy_stop)));
      }
      *covered = shortest >= longest;
    }
  };

  std::vector<Consumer> consumers;
  for (int ctas : budgets) consumers.push_back({"reduce ctas " + std::to_string(ctas), ctas});
  consumers.push_back({"local copy", 0});
  const bool only0[2] = {true, false}, only1[2] = {false, true}, both[2] = {true, true};
  struct Placement {
    const char* name;
    const bool* on;
  };
  for (bool bi : {false, true}) {
    const char* mode = bi ? "bi " : "uni";
    std::vector<double> alone;
    for (int r = 0; r < repeats + 1; ++r) {  // the first is a warm-up
      double gbps = 0;
      run(bi, nullptr, both, 0, &gbps, nullptr, nullptr);
      if (r > 0) alone.push_back(gbps);
    }
    const double copy_alone = median(alone);
    const double copy_ms = static_cast<double>(copies) * chunk / (copy_alone * 1e6);
    std::printf("%s copies alone                          copy %7.1f GB/s\n", mode, copy_alone);
    std::fflush(stdout);
    const Placement placements[] = {{bi ? "on GPU 1" : "on the receiver", only1},
                                    {bi ? "on GPU 0" : "on the sender", only0},
                                    {"on both", both}};
    for (const Consumer& consumer : consumers) {
      // The consumer alone on GPU 1, to size its loop: at least twice the copies' time alone.
      std::vector<double> rates;
      for (int r = 0; r < 3; ++r) {
        __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
        check(cudaSetDevice(1), "cudaSetDevice");
        enqueue_consumer(gpus[1], consumer, 10);
        check(cudaStreamSynchronize(gpus[1].consumer_stream), "cudaStreamSynchronize");
        rates.push_back(10.0 * chunk / (elapsed_ms(gpus[1].consumer_start, gpus[1].consumer_stop) * 1e6));
      }
      const double consumer_alone = median(rates);
      const double launch_ms = chunk / (consumer_alone * 1e6);
      const int launches = std::max(1, static_cast<int>(std::ceil(2.0 * copy_ms / launch_ms)));
      std::printf("%s %-16s alone                consumer %7.1f GB/s\n", mode, consumer.name.c_str(),
                  consumer_alone);
      for (const Placement& placement : placements) {
        std::vector<double> copy_rates, consumer_rates;
        bool all_covered = true;
        for (int r = 0; r < repeats; ++r) {
          double copy_gbps = 0, consumer_gbps = 0;
          bool covered = false;
          run(bi, &consumer, placement.on, launches, &copy_gbps, &consumer_gbps, &covered);
          copy_rates.push_back(copy_gbps);
          consumer_rates.push_back(consumer_gbps);
          all_covered = all_covered && covered;
        }
        const double copy_with = median(copy_rates);
        std::printf("%s %-16s %-16s copy %7.1f GB/s (%.2f of alone)  consumer %7.1f GB/s  overlap %s\n", mode,
                    consumer.name.c_str(), placement.name, copy_with, copy_with / copy_alone,
                    median(consumer_rates), all_covered ? "yes" : "NO");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
