#pragma once
// What the probes that run two ranks as threads of one process share: a loopback port for rank 0's store, a
// bounded spin, and a gate that holds a stream until both ranks have enqueued their timed work (so that enqueue cost
// stays out of the timed window). Two threads share one CUDA context on one GPU: no time-slicing between contexts.
#include <arpa/inet.h>
#include <cuda_runtime.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>

#include "probe_check.hpp"

namespace probe {

/// A free TCP port on the loopback interface for rank 0's store (bound to port 0, read back, released).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    std::perror("probe: picking a port");
    std::exit(1);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// One step of a spin that gives up after a minute: a rank that failed must not leave the other spinning forever.
inline void bounded_wait(const char* what) {
  static thread_local auto started = std::chrono::steady_clock::now();
  static thread_local const char* waiting_for = nullptr;
  if (waiting_for != what) {
    waiting_for = what;
    started = std::chrono::steady_clock::now();
  }
  if (std::chrono::steady_clock::now() - started > std::chrono::seconds(60)) {
    std::fprintf(stderr, "probe: waited 60 s for %s; giving up\n", what);
    std::_Exit(1);
  }
  std::this_thread::yield();
}

/// Blocks `stream` until `gate` reaches `value`.
inline void gate_stream(cudaStream_t stream, std::atomic<int>* gate, int value) {
  struct Arg {
    std::atomic<int>* gate;
    int value;
  };
  auto* arg = new Arg{gate, value};
  check(cudaLaunchHostFunc(
            stream,
            [](void* p) {
              auto* a = static_cast<Arg*>(p);
              while (a->gate->load(std::memory_order_acquire) < a->value) bounded_wait("the gate");
              delete a;
            },
            arg),
        "cudaLaunchHostFunc");
}

/// Options of rank `rank` of two ranks that are threads of this process (rank r on GPU r modulo `gpus`), with the
/// store at 127.0.0.1:`port`.
inline pickle::Communicator::Options rank_options(int rank, int port, int gpus) {
  pickle::RankInfo info;
  info.rank = rank;
  info.world_size = 2;
  info.local_rank = rank;
  info.local_world_size = 2;
  info.master_port = port;
  pickle::Communicator::Options options;
  options.rank_info = info;
  options.memory = pickle::MemoryKind::Cuda;
  options.device = rank % gpus;
  return options;
}

}  // namespace probe
