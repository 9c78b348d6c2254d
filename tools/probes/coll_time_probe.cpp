// coll_time_probe: the stream time of pickle's collectives between two ranks that are two threads of this process,
// each with its Communicator (on one GPU they share one CUDA context; with two GPUs rank r uses GPU r). Two
// processes on one GPU take turns on it, which buries per-call costs of tens of microseconds under time-slicing;
// two threads of one context see what the copy engines, the reduction and the stream operations cost.
//
// For each collective and size: `n` calls back to back on one stream, timed as `pickle bench coll` times them
// (tools/pickle/bench/coll_step.hpp): after a barrier, a start event on the idle stream, the calls, a stop event; so
// enqueue cost is included (a stream gate cannot be used: an allreduce's host waits for its own earlier chunks'
// reductions). The slower rank's time per call, median of the repeats; beside it, the slower rank's host time per
// call to enqueue the calls (median), which bounds the rate when the copies are short. The last call's output is
// checked element by element (allgather: rank r's block holds r + 1; allreduce: every element is 1 + 2 = 3), and a
// mismatch fails the probe.
//
// PROBE_PROFILE=FILE samples the hosts' enqueue loops (host_sampler.hpp; symbolize_samples.py reads FILE).
//
// Usage: coll_time_probe [calls=20] [repeats=7] [collectives=allgather,allreduce] [bytes...=1M 16M 64M 256M]
// (bytes: the output size, as nccl-tests' size column). On one GPU the copies are device-to-device within one HBM:
// the figures are not link figures; they compare per-call overheads between builds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>

#include "host_sampler.hpp"
#include "two_rank_threads.hpp"
#include "probe_args.hpp"

namespace {

using probe::bounded_wait;
using probe::check;

enum class Collective { Allgather, Allreduce };

struct Shared {
  int port = 0;
  int gpus = 1;
  int calls = 20;
  int repeats = 7;
  std::vector<Collective> collectives;
  std::vector<std::size_t> sizes;
  std::atomic<int> gate{0};      // the repeat both ranks have reached
  std::atomic<int> enqueued{0};  // ranks that reached a repeat, over all repeats
  double rank_us[2] = {0, 0};  // each rank's time per call of the current repeat (written before a barrier)
  double rank_host_us[2] = {0, 0};  // each rank's host time per call to enqueue them, same repeat
  std::atomic<int> wrong{0};
};

const char* name_of(Collective c) { return c == Collective::Allgather ? "allgather" : "allreduce"; }

/// Enqueues one call of `collective` with an output of `bytes` (f32).
void call(pickle::Communicator& comm, pickle::Stream& stream, Collective collective, std::size_t bytes, void* send,
          void* recv) {
  if (collective == Collective::Allgather) {
    comm.allgather(stream, send, recv, bytes / 4 / 2, pickle::DataType::F32);
  } else {
    comm.allreduce(stream, send, recv, bytes / 4, pickle::DataType::F32, pickle::ReduceOp::Sum);
  }
}

/// Elements of the last call's output that are not what the collective must produce.
std::size_t count_wrong(Collective collective, std::size_t bytes, const void* recv) {
  std::vector<float> out(bytes / 4);
  check(cudaMemcpy(out.data(), recv, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float want = collective == Collective::Allreduce ? 3.0f : (i < out.size() / 2 ? 1.0f : 2.0f);
    wrong += out[i] != want;
  }
  return wrong;
}

/// One timed repeat: `calls` calls back to back; returns this rank's microseconds per call (stream time), and its
/// host's time per call to enqueue them in `host_us`.
double run_once(double& host_us, pickle::Communicator& comm, pickle::Stream& stream, Shared& shared, Collective collective,
                std::size_t bytes, void* send, void* recv, int round) {
  auto native = static_cast<cudaStream_t>(stream.native_handle());
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  // Both ranks start together (the previous repeat ended with a barrier; this spin is tighter than a store round).
  if (shared.enqueued.fetch_add(1) + 1 == 2 * round) shared.gate.store(round, std::memory_order_release);
  while (shared.gate.load(std::memory_order_acquire) < round) bounded_wait("the other rank");
  check(cudaEventRecord(start, native), "cudaEventRecord");
  const auto enqueue_start = std::chrono::steady_clock::now();
  {
    probe::HostSampler::Scope sampled;  // PROBE_PROFILE: where the host's enqueue time goes
    for (int i = 0; i < shared.calls; ++i) call(comm, stream, collective, bytes, send, recv);
  }
  host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - enqueue_start).count() /
            shared.calls;
  check(cudaEventRecord(stop, native), "cudaEventRecord");
  stream.synchronize();  // also runs the calls' error checks
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e3 / shared.calls;
}

void rank_main(int rank, Shared& shared) {
  try {
    check(cudaSetDevice(rank % shared.gpus), "cudaSetDevice");
    pickle::Communicator comm(probe::rank_options(rank, shared.port, shared.gpus));
    const std::size_t max_bytes = *std::max_element(shared.sizes.begin(), shared.sizes.end());
    pickle::Buffer send = comm.alloc(max_bytes), recv = comm.alloc(max_bytes);
    {
      // Every input element is rank + 1: allgather's blocks are 1 and 2, allreduce's sums 3.
      std::vector<float> ones(max_bytes / 4, static_cast<float>(rank + 1));
      check(cudaMemcpy(send.data(), ones.data(), max_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    pickle::Stream stream = comm.make_stream();
    int round = 0;
    for (Collective collective : shared.collectives) {
      for (std::size_t bytes : shared.sizes) {
        std::vector<double> us, host_us;
        for (int r = 0; r < shared.repeats + 1; ++r) {  // the first is a warm-up
          check(cudaMemset(recv.data(), 0, bytes), "cudaMemset");
          shared.rank_us[rank] = run_once(shared.rank_host_us[rank], comm, stream, shared, collective, bytes, send.data(),
                                          recv.data(), ++round);
          if (const std::size_t wrong = count_wrong(collective, bytes, recv.data()); wrong != 0) {
            std::fprintf(stderr, "rank %d: %s of %zu bytes: %zu wrong elements\n", rank, name_of(collective), bytes,
                         wrong);
            shared.wrong.fetch_add(1);
          }
          comm.barrier();
          if (r > 0) {
            us.push_back(std::max(shared.rank_us[0], shared.rank_us[1]));
            host_us.push_back(std::max(shared.rank_host_us[0], shared.rank_host_us[1]));
          }
          comm.barrier();  // rank_us is rewritten in the next repeat only after both read it
        }
        if (rank != 0) continue;
        std::sort(us.begin(), us.end());
        std::sort(host_us.begin(), host_us.end());
        const double median = us[us.size() / 2];
        // busbw as nccl-tests: allgather (n-1)/n of the output per call, allreduce 2(n-1)/n; n = 2.
        const double factor = collective == Collective::Allgather ? 0.5 : 1.0;
        std::printf("%-9s %11zu  %9.1f us/call  (min %.1f max %.1f)  busbw %7.1f GB/s  host enqueue %.1f us/call\n",
                    name_of(collective), bytes, median, us.front(), us.back(), bytes * factor / (median * 1e3),
                    host_us[host_us.size() / 2]);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    // At once: the other rank may be waiting for this one, and would only give up after a minute.
    std::fprintf(stderr, "coll_time_probe: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Shared shared;
  shared.calls = argc > 1 ? std::atoi(argv[1]) : 20;
  shared.repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  const std::string collectives = argc > 3 ? argv[3] : "allgather,allreduce";
  if (collectives.find("allgather") != std::string::npos) shared.collectives.push_back(Collective::Allgather);
  if (collectives.find("allreduce") != std::string::npos) shared.collectives.push_back(Collective::Allreduce);
  for (int i = 4; i < argc; ++i) shared.sizes.push_back(probe::parse_bytes(argv[i]));
  if (shared.sizes.empty()) shared.sizes = {1u << 20, 16u << 20, 64u << 20, 256u << 20};
  for (std::size_t bytes : shared.sizes) {
    if (bytes == 0 || bytes % 32 != 0) {
      std::fprintf(stderr, "coll_time_probe: %zu bytes: sizes must be positive multiples of 32\n", bytes);
      return 2;
    }
  }
  shared.port = probe::free_port();
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);  // see comm_latency_probe: both ranks' streams in one context
  check(cudaGetDeviceCount(&shared.gpus), "cudaGetDeviceCount");
  shared.gpus = std::min(shared.gpus, 2);
  check(cudaSetDevice(0), "cudaSetDevice");
  std::printf("# coll_time_probe: 2 ranks, threads of one process on %s, %d calls per repeat, median of %d; "
              "PICKLE_REDUCE_CTAS=%s\n",
              shared.gpus == 1 ? "GPU 0" : "GPUs 0 and 1", shared.calls, shared.repeats,
              std::getenv("PICKLE_REDUCE_CTAS") ? std::getenv("PICKLE_REDUCE_CTAS") : "(unset)");
  probe::HostSampler sampler;
  sampler.start();
  std::thread t0(rank_main, 0, std::ref(shared));
  std::thread t1(rank_main, 1, std::ref(shared));
  t0.join();
  t1.join();
  sampler.stop();
  return shared.wrong.load() == 0 ? 0 : 1;
}
