// comm_latency_probe: pickle's own send/recv latency and small-message rate between two ranks that are two threads
// of this process, each with its Communicator: on one GPU they share one CUDA context; with two GPUs, rank r uses
// GPU r. Two processes on one GPU take turns on it (time-slicing), which buries microseconds under scheduling noise;
// two threads of one process share the context and see what the copy engine and the stream memory operations cost,
// as two GPUs would.
//
//   lat  one-way time of a ping-pong (rank 0's time for n round trips / 2n), stream-ordered on both sides:
//        send(after = timing stream), recv(...).on_stream(timing)
//   uni  us per message of n back-to-back messages rank 0 -> rank 1
// Each in two orders: "late" (sends issued while the peer's posts are still on their way, as `pickle bench p2p`
// issued them until it posted receives ahead: the copy waits for the match on a copy stream) and "posted" (every recv posted, and seen by
// the peer, before the first send: the copy joins the caller's stream at once).
//
// Usage: comm_latency_probe [iterations=200] [repeats=7] [modes=lat,uni] [bytes...=4096 65536 1048576].
// PICKLE_IPC_STREAMS and PICKLE_TRANSPORT apply as usual (shm: device-to-host and host-to-device copies through the
// staging ring, over this GPU's PCIe link both ways, as two GPUs without peer access would use theirs). Output: one
// line per (mode, order, size): rank 0's median over repeats with its min and max and the GB/s of the median, then
// rank 1's median. Uni also runs "last": posted, with one stream wait per rank for the last message only.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>

#include "two_rank_threads.hpp"

namespace {

using probe::bounded_wait;
using probe::check;
using probe::free_port;
using probe::gate_stream;

/// LastOnly: posted, and in uni each stream waits only for its last message (one copy stream: completions land in
/// order); the host waits for the others after the timing. It shows what a stream wait per message costs.
enum class Order { Late, Posted, LastOnly };
enum class Mode { Lat, Uni };

struct Shared {
  int port = 0;
  int gpus = 1;  // rank r uses GPU r modulo this: one GPU, or two (a pair of GPUs seen from one process)
  int iterations = 200;
  int repeats = 7;
  std::vector<std::size_t> sizes;
  std::vector<Mode> modes;
  std::atomic<int> gate{0};  // bumped by rank 0 when both chains are enqueued
  std::atomic<int> enqueued{0};
  double rank1_median_us = 0;  // written by rank 1 before a barrier, read by rank 0 after it
};


/// One timed repeat; returns this rank's microseconds (per hop for lat, per message for uni).
double run_once(pickle::Communicator& comm, pickle::Stream& timing, Shared& shared, Mode mode, Order order,
                std::size_t bytes, void* send_buf, void* recv_buf, int round) {
  const int rank = comm.rank(), peer = 1 - rank, n = shared.iterations, tag = 7;
  auto stream = static_cast<cudaStream_t>(timing.native_handle());
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  gate_stream(stream, &shared.gate, round);
  check(cudaEventRecord(start, stream), "cudaEventRecord");

  std::vector<pickle::Request> recvs;
  const bool receives = mode == Mode::Lat || rank == 1;
  const bool posted = order != Order::Late;
  if (posted) {
    for (int i = 0; receives && i < n; ++i) recvs.push_back(comm.recv(peer, tag, recv_buf, bytes));
    const bool sends = mode == Mode::Lat || rank == 0;
    while (sends && comm.posted_receives(peer, tag) < static_cast<std::size_t>(n)) {
      bounded_wait("the peer's receives");
    }
  }
  auto recv_at = [&](int i) {
    if (posted) return recvs[static_cast<std::size_t>(i)];
    return comm.recv(peer, tag, recv_buf, bytes);
  };
  pickle::Request last;
  std::vector<pickle::Request> requests;  // uni: this rank's, waited for from the timing stream
  if (mode == Mode::Lat) {
    for (int i = 0; i < n; ++i) {
      if (rank == 0) {
        last = comm.send(peer, tag, send_buf, bytes, &timing);
        recv_at(i).on_stream(timing);
      } else {
        recv_at(i).on_stream(timing);
        last = comm.send(peer, tag, send_buf, bytes, &timing);
      }
    }
    last.on_stream(timing);
  } else if (rank == 0) {
    for (int i = 0; i < n; ++i) requests.push_back(comm.send(peer, tag, send_buf, bytes, &timing));
  } else {
    for (int i = 0; i < n; ++i) requests.push_back(recv_at(i));
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (order != Order::LastOnly || i + 1 == requests.size()) requests[i].on_stream(timing);
  }
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  // Both chains are in: open both gates.
  if (shared.enqueued.fetch_add(1) + 1 == 2 * round) shared.gate.store(round, std::memory_order_release);
  while (shared.gate.load(std::memory_order_acquire) < round) bounded_wait("the other rank's enqueue");
  timing.synchronize();
  for (auto& request : requests) request.wait();  // LastOnly: the ones the stream did not wait for
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  comm.barrier();
  return ms * 1e3 / (mode == Mode::Lat ? 2.0 * n : n);
}

void rank_main(int rank, Shared& shared, std::exception_ptr& error) {
  try {
    check(cudaSetDevice(rank % shared.gpus), "cudaSetDevice");  // this thread's events and memsets
    pickle::Communicator comm(probe::rank_options(rank, shared.port, shared.gpus));
    const std::size_t max_bytes = *std::max_element(shared.sizes.begin(), shared.sizes.end());
    pickle::Buffer send = comm.alloc(max_bytes), recv = comm.alloc(max_bytes);
    check(cudaMemset(send.data(), rank + 1, max_bytes), "cudaMemset");
    pickle::Stream timing = comm.make_stream();
    int round = 0;
    for (Mode mode : shared.modes) {
      for (Order order : {Order::Late, Order::Posted, Order::LastOnly}) {
        if (order == Order::LastOnly && mode != Mode::Uni) continue;
        for (std::size_t bytes : shared.sizes) {
          std::vector<double> us;
          for (int r = 0; r < shared.repeats + 1; ++r) {  // the first is a warm-up
            double t = run_once(comm, timing, shared, mode, order, bytes, send.data(), recv.data(), ++round);
            if (r > 0) us.push_back(t);
          }
          std::sort(us.begin(), us.end());
          // Rank 1's clock too: in uni it is the receiver's stream, waiting on each message's completion word.
          if (rank == 1) shared.rank1_median_us = us[us.size() / 2];
          comm.barrier();
          if (rank != 0) continue;
          const double median = us[us.size() / 2];
          const char* order_name = order == Order::Late ? "late" : order == Order::Posted ? "posted" : "last";
          std::printf("%-4s %-7s %10zu  %9.2f us  (min %.2f max %.2f)  %7.2f GB/s   rank 1: %.2f us\n",
                      mode == Mode::Lat ? "lat" : "uni", order_name, bytes, median, us.front(), us.back(),
                      bytes / (median * 1e3), shared.rank1_median_us);
          std::fflush(stdout);
        }
      }
    }
    // A byte of the last message, to be sure data moved: rank 1 received rank 0's (value 1) everywhere.
    if (rank == 1) {
      unsigned char first = 0;
      check(cudaMemcpy(&first, recv.data(), 1, cudaMemcpyDeviceToHost), "cudaMemcpy");
      if (first != 1) {
        std::fprintf(stderr, "rank 1 received byte %d, expected 1\n", first);
        std::exit(1);
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
}

/// The ceiling of the shm transport on this GPU: pinned device-to-host and host-to-device copies of `bytes`, alone
/// and both at once (the sender's and the receiver's halves of the staging pipeline run at the same time).
void print_pcie_ceiling(std::size_t bytes) {
  void *device_a, *device_b, *host_a, *host_b;
  check(cudaMalloc(&device_a, bytes), "cudaMalloc");
  check(cudaMalloc(&device_b, bytes), "cudaMalloc");
  check(cudaMallocHost(&host_a, bytes), "cudaMallocHost");
  check(cudaMallocHost(&host_b, bytes), "cudaMallocHost");
  cudaStream_t down, up;
  check(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), "cudaStreamCreate");
  auto seconds = [&](bool d2h, bool h2d) {
    std::vector<double> times;
    for (int r = 0; r < 6; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      if (d2h) check(cudaMemcpyAsync(host_a, device_a, bytes, cudaMemcpyDeviceToHost, down), "cudaMemcpyAsync");
      if (h2d) check(cudaMemcpyAsync(device_b, host_b, bytes, cudaMemcpyHostToDevice, up), "cudaMemcpyAsync");
      check(cudaStreamSynchronize(down), "cudaStreamSynchronize");
      check(cudaStreamSynchronize(up), "cudaStreamSynchronize");
      if (r > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  std::printf("# PCIe ceiling, %zu bytes: device-to-host %.2f GB/s, host-to-device %.2f GB/s, both at once %.2f GB/s "
              "each\n",
              bytes, bytes / seconds(true, false) / 1e9, bytes / seconds(false, true) / 1e9,
              bytes / seconds(true, true) / 1e9);
  cudaStreamDestroy(down);
  cudaStreamDestroy(up);
  cudaFreeHost(host_a);
  cudaFreeHost(host_b);
  cudaFree(device_a);
  cudaFree(device_b);
}

}  // namespace

int main(int argc, char** argv) {
  Shared shared;
  shared.iterations = argc > 1 ? std::atoi(argv[1]) : 200;
  shared.repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  const std::string modes = argc > 3 ? argv[3] : "lat,uni";
  if (modes.find("lat") != std::string::npos) shared.modes.push_back(Mode::Lat);
  if (modes.find("uni") != std::string::npos) shared.modes.push_back(Mode::Uni);
  for (int i = 4; i < argc; ++i) shared.sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (shared.sizes.empty()) shared.sizes = {4096, 65536, 1 << 20};
  shared.port = free_port();
  // Both ranks' streams share one context, and streams beyond CUDA_DEVICE_MAX_CONNECTIONS (8 by default) share
  // hardware queues: a copy queued behind the other rank's stream wait would never run. Separate processes (how
  // pickle runs) have a context, and queues, each. Set before CUDA starts.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  check(cudaGetDeviceCount(&shared.gpus), "cudaGetDeviceCount");
  shared.gpus = std::min(shared.gpus, 2);
  check(cudaSetDevice(0), "cudaSetDevice");
  const char* streams = std::getenv("PICKLE_IPC_STREAMS");
  const char* transport = std::getenv("PICKLE_TRANSPORT");
  std::printf("# comm_latency_probe: 2 ranks, threads of one process on %s, %d iterations, median of %d; "
              "PICKLE_IPC_STREAMS=%s PICKLE_TRANSPORT=%s\n",
              shared.gpus == 1 ? "GPU 0" : "GPUs 0 and 1", shared.iterations, shared.repeats, streams ? streams : "(unset)", transport ? transport : "(unset)");
  if (transport != nullptr && std::string(transport) == "shm") {
    print_pcie_ceiling(*std::max_element(shared.sizes.begin(), shared.sizes.end()));
  }
  std::exception_ptr errors[2];
  std::thread t0(rank_main, 0, std::ref(shared), std::ref(errors[0]));
  std::thread t1(rank_main, 1, std::ref(shared), std::ref(errors[1]));
  t0.join();
  t1.join();
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "comm_latency_probe: %s\n", ex.what());
      return 1;
    }
  }
  return 0;
}
