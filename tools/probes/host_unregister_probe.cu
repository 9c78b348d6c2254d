// host_unregister_probe: which host-memory calls of CUDA wait for a stream that is held on a word the host has not
// written yet (cuStreamWaitValue32: a benchmark's gate, or a stream waiting for a peer's signal). A thread writes the
// word 1 s later; each call prints how long it took. A call that took about 1 s waited for the stream, and
// called from the thread that would release it (or while the releasing peer waits for this thread) it never returns.
// Why pickle keeps its pinned staging buffers until the communicator goes (src/comm/staging_pool.hpp).
//
// Usage: host_unregister_probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "probe_check.hpp"

namespace {

using probe::check;


void* pages(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::exit(1);
  return p;
}

}  // namespace

int main() {
  check(cudaSetDevice(0), "cudaSetDevice");
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  constexpr std::size_t kBytes = 1 << 20;
  unsigned* gate = nullptr;
  check(cudaHostAlloc(&gate, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  *gate = 0;
  void* registered = pages(kBytes);  // registered before the stream is held
  check(cudaHostRegister(registered, kBytes, cudaHostRegisterDefault), "cudaHostRegister");
  void* fresh = pages(kBytes);
  void* device = nullptr;
  check(cudaMalloc(&device, kBytes), "cudaMalloc");
  cudaStream_t held;
  check(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking), "cudaStreamCreate");

  // Each call is timed against a stream held anew: it waits for gate >= k, which a thread writes 1 s later.
  unsigned k = 0;
  auto timed = [&](const char* name, auto&& call) {
    ++k;
    if (wait_value(held, reinterpret_cast<CUdeviceptr>(gate), k, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) std::exit(1);
    check(cudaMemcpyAsync(device, registered, kBytes, cudaMemcpyDefault, held), "cudaMemcpyAsync");
    std::thread release([&, k] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      __atomic_store_n(gate, k, __ATOMIC_RELEASE);
    });
    const auto start = std::chrono::steady_clock::now();
    const cudaError_t status = call();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-48s %-10s took %7.1f ms%s\n", name, cudaGetErrorString(status), ms,
                ms > 900 ? "  <- waited for the held stream" : "");
    release.join();
    check(cudaStreamSynchronize(held), "cudaStreamSynchronize");
  };
  std::printf("# each call made while a stream is held for 1000 ms on a host-written word\n");
  timed("cudaHostRegister (new pages)", [&] { return cudaHostRegister(fresh, kBytes, cudaHostRegisterDefault); });
  timed("cudaHostUnregister (those pages, never used)", [&] { return cudaHostUnregister(fresh); });
  void* pinned = nullptr;
  timed("cudaHostAlloc", [&] { return cudaHostAlloc(&pinned, kBytes, 0); });
  timed("cudaFreeHost (that memory, never used)", [&] { return cudaFreeHost(pinned); });
  void* more = nullptr;
  timed("cudaMalloc", [&] { return cudaMalloc(&more, kBytes); });
  timed("cudaFree (that memory, never used)", [&] { return cudaFree(more); });
  timed("cudaHostUnregister (pages the held copy reads)", [&] { return cudaHostUnregister(registered); });
  return 0;
}
