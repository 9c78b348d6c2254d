// local_copy_probe: which ways of copying inside one GPU run on a copy engine, and which as SM work?
//
// On H200s a device-to-device cudaMemcpyAsync inside one GPU reached 19-20 GB/s beside a kernel that held the SMs,
// while copies into pinned host memory kept their PCIe ceiling beside it (docs/results/2026-11-28k-h200.md): the
// former is SM work. pickle's out-of-place collectives copy the rank's own block that way, so they are not zero-SM
// and starve under a busy GPU. This probe times each copy path alone and beside a kernel that occupies every SM
// (one CTA per SM slot, spinning for `hold_ms`); a path on a copy engine keeps its rate beside it, an SM path waits.
// Every path's destination is checked after its copies (CUDA 13.0's overlap hint once left one unwritten).
//
// Paths: memcpy-d2d (cudaMemcpyAsync DeviceToDevice), memcpy-default (cudaMemcpyDefault), peer-same
// (cudaMemcpyPeerAsync with the same device on both sides), memcpy-2d (cudaMemcpy2DAsync, 64 KiB rows), batch
// (cudaMemcpyBatchAsync, no hint), batch-hint (with cudaMemcpyFlagPreferOverlapWithCompute), d2h (into pinned host
// memory: a copy engine for sure, the reference), vmm (into a cuMemCreate allocation mapped as usual), vmm-imported
// (into the same kind of allocation exported as a file descriptor, imported again and mapped at a second address, as
// a peer process maps it: does CUDA copy into memory it sees as imported with a copy engine, even on the same GPU?),
// ipc-other-process (into a buffer of another process on the same GPU, opened with cudaIpcOpenMemHandle: what
// pickle's ipc transport does between two ranks that share a GPU).
//
// Usage: local_copy_probe [bytes=256M] [copies=8] [hold_ms=300]
// Output: one line per path: GB/s alone, GB/s beside the spinning kernel, and whether the data arrived.
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;

/// Spins until `cycles` SM clocks have passed, holding its CTA's slot (and shared memory) all the while; its first
/// CTA raises `started` (mapped host memory) so that the host enqueues the copies only once it runs.
__global__ void hold_sms(long long cycles, volatile int* started) {
  extern __shared__ unsigned char reserved[];
  if (blockIdx.x == 0 && threadIdx.x == 0) *started = 1;
  const long long start = clock64();
  while (clock64() - start < cycles) {
    if (threadIdx.x == 0) reserved[0] = 1;  // keeps the shared allocation alive
  }
}

enum class Path { MemcpyD2D, MemcpyDefault, PeerSame, Memcpy2D, Batch, BatchHint, D2H, Vmm, VmmImported, IpcOther };
constexpr struct {
  Path path;
  const char* name;
} kPaths[] = {{Path::MemcpyD2D, "memcpy-d2d"}, {Path::MemcpyDefault, "memcpy-default"},
              {Path::PeerSame, "peer-same"},   {Path::Memcpy2D, "memcpy-2d"},
              {Path::Batch, "batch"},          {Path::BatchHint, "batch-hint"},
              {Path::D2H, "d2h"},              {Path::Vmm, "vmm"},
              {Path::VmmImported, "vmm-imported"}, {Path::IpcOther, "ipc-other-process"}};

void enqueue(Path path, void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  switch (path) {
    case Path::MemcpyD2D:
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync D2D");
      return;
    case Path::MemcpyDefault:
    case Path::D2H:
    case Path::Vmm:
    case Path::VmmImported:
    case Path::IpcOther:
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync default");
      return;
    case Path::PeerSame:
      check(cudaMemcpyPeerAsync(dst, 0, src, 0, bytes, stream), "cudaMemcpyPeerAsync");
      return;
    case Path::Memcpy2D: {
      const std::size_t width = 64 << 10;  // main() makes `bytes` a multiple of it
      check(cudaMemcpy2DAsync(dst, width, src, width, width, bytes / width, cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpy2DAsync");
      return;
    }
    case Path::Batch:
    case Path::BatchHint: {
#if CUDART_VERSION >= 13000
      cudaMemcpyAttributes attributes{};
      attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      if (path == Path::BatchHint) attributes.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      void* dsts[] = {dst};
      const void* srcs[] = {src};
      std::size_t sizes[] = {bytes}, first = 0;
      check(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attributes, &first, 1, stream), "cudaMemcpyBatchAsync");
#else
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync (no batch API)");
#endif
      return;
    }
  }
}

void check_driver(CUresult status, const char* what) {
  if (status == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(status, &name);
  std::fprintf(stderr, "local_copy_probe: %s: %s\n", what, name != nullptr ? name : "?");
  std::exit(1);
}

/// `bytes` of GPU 0's memory from cuMemCreate, mapped at one address; with `imported`, exported as a file
/// descriptor, imported again and mapped from the imported handle (what a peer process does with it).
void* vmm_buffer(std::size_t bytes, bool imported) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::size_t granularity = 0;
  check_driver(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity");
  const std::size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  check_driver(cuMemCreate(&handle, size, &prop, 0), "cuMemCreate");
  if (imported) {
    int fd = -1;
    check_driver(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "export");
    CUmemGenericAllocationHandle again = 0;
    check_driver(cuMemImportFromShareableHandle(&again, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                 "import");
    ::close(fd);
    handle = again;  // the original handle stays alive (never released: the probe exits)
  }
  CUdeviceptr address = 0;
  check_driver(cuMemAddressReserve(&address, size, 0, 0, 0), "cuMemAddressReserve");
  check_driver(cuMemMap(address, size, 0, handle, 0), "cuMemMap");
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check_driver(cuMemSetAccess(address, size, &access, 1), "cuMemSetAccess");
  return reinterpret_cast<void*>(address);
}

/// A process that allocates `bytes` on GPU 0 and hands this one a cudaIpc handle of it through a pipe, then waits
/// until this one closes its end of `release`. Forked before this process touches CUDA.
struct OtherProcess {
  pid_t pid = -1;
  int release = -1;  // this process's end: closing it lets the other exit
  bool ready = false;  // the handle arrived (not on a machine without a GPU)
  cudaIpcMemHandle_t handle{};

  void stop() {
    ::close(release);
    ::waitpid(pid, nullptr, 0);
  }
};

OtherProcess start_other_process(std::size_t bytes) {
  int handle_pipe[2], release_pipe[2];
  if (::pipe(handle_pipe) != 0 || ::pipe(release_pipe) != 0) {
    std::perror("local_copy_probe: pipe");
    std::exit(1);
  }
  OtherProcess other;
  other.pid = ::fork();
  if (other.pid == 0) {
    ::close(handle_pipe[0]);
    ::close(release_pipe[1]);
    void* buffer = nullptr;
    cudaIpcMemHandle_t handle{};
    const bool ok = cudaSetDevice(0) == cudaSuccess && cudaMalloc(&buffer, bytes) == cudaSuccess &&
                    cudaIpcGetMemHandle(&handle, buffer) == cudaSuccess;
    if (!ok || ::write(handle_pipe[1], &handle, sizeof handle) != static_cast<ssize_t>(sizeof handle)) ::_exit(1);
    char byte;
    while (::read(release_pipe[0], &byte, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(handle_pipe[1]);
  ::close(release_pipe[0]);
  other.release = release_pipe[1];
  other.ready = ::read(handle_pipe[0], &other.handle, sizeof other.handle) == static_cast<ssize_t>(sizeof other.handle);
  ::close(handle_pipe[0]);
  return other;
}

struct Hold {
  long long cycles = 0;  // 0: no kernel beside the copies
  int ctas = 0;
  std::size_t shared = 0;
  volatile int* started = nullptr;  // mapped host memory
};

/// GB/s of `copies` copies of `bytes` from the moment they are enqueued (right after the holding kernel, when
/// `hold.cycles` > 0, and once it runs) to their completion.
double time_copies(Path path, void* dst, const void* src, std::size_t bytes, int copies, const Hold& hold,
                   cudaStream_t compute, cudaStream_t copy) {
  if (hold.cycles > 0) {
    *hold.started = 0;
    hold_sms<<<hold.ctas, 1024, hold.shared, compute>>>(hold.cycles, hold.started);
    check(cudaGetLastError(), "hold_sms launch");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (*hold.started == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "local_copy_probe: the holding kernel did not start within 10 s\n");
        std::exit(1);
      }
    }
  }
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, copy), "cudaEventRecord");
  for (int i = 0; i < copies; ++i) enqueue(path, dst, src, bytes, copy);
  check(cudaEventRecord(stop, copy), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  return static_cast<double>(bytes) * copies / (ms * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  // A multiple of 64 KiB, the 2D copy's row.
  const std::size_t asked = argc > 1 ? probe::parse_bytes(argv[1]) : std::size_t{256} << 20;
  const std::size_t bytes = asked & ~((std::size_t{64} << 10) - 1);
  if (bytes == 0) {
    std::fprintf(stderr, "local_copy_probe: bytes must be at least 64K\n");
    return 2;
  }
  const int copies = argc > 2 ? std::atoi(argv[2]) : 8;
  const double hold_ms = argc > 3 ? std::atof(argv[3]) : 300;
  OtherProcess other = start_other_process(bytes);  // before this process touches CUDA (fork)
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 1) {
    std::printf("local_copy_probe: needs a GPU; nothing to measure\n");
    other.stop();
    return 0;
  }
  if (!other.ready) {
    std::fprintf(stderr, "local_copy_probe: the other process gave no cudaIpc handle\n");
    return 1;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  // Every SM slot taken: as many 1024-thread CTAs as an SM holds, each with its share of the shared memory.
  const int per_sm = properties.maxThreadsPerMultiProcessor / 1024;
  Hold hold;
  hold.ctas = properties.multiProcessorCount * per_sm;
  hold.shared = properties.sharedMemPerMultiprocessor / per_sm - properties.reservedSharedMemPerBlock;
  check(cudaFuncSetAttribute(hold_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(hold.shared)),
        "cudaFuncSetAttribute");
  check(cudaFuncSetAttribute(hold_sms, cudaFuncAttributePreferredSharedMemoryCarveout, 100), "cudaFuncSetAttribute");
  int resident = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, hold_sms, 1024, hold.shared), "occupancy");
  if (resident != per_sm) {
    std::fprintf(stderr, "local_copy_probe: %d holding CTAs fit on an SM, not %d: the SMs would not be full\n",
                 resident, per_sm);
    return 1;
  }
  int* started = nullptr;
  check(cudaHostAlloc(&started, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
  hold.started = started;
  int clock_khz = 0;  // cudaDeviceProp::clockRate is gone from CUDA 13
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "cudaDeviceGetAttribute");
  hold.cycles = static_cast<long long>(hold_ms * clock_khz);

  unsigned char *src = nullptr, *dst = nullptr, *host = nullptr;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&dst, bytes), "cudaMalloc");
  check(cudaMallocHost(&host, bytes), "cudaMallocHost");
  check(cudaMemset(src, 0x5a, bytes), "cudaMemset");  // the byte every destination must hold afterwards
  cudaStream_t compute, copy;
  check(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), "cudaStreamCreate");
  std::printf("# local_copy_probe: GPU 0 (%s), %d copies of %zu bytes per measurement; beside: %d CTAs of 1024 "
              "threads holding every SM for %.0f ms\n",
              properties.name, copies, bytes, hold.ctas, hold_ms);
  std::printf("# %-18s %12s %14s  %s\n", "path", "alone GB/s", "beside GB/s", "data");
  std::vector<unsigned char> check_buffer(bytes);
  // Bytes of `target` that are not the source's.
  auto wrong_bytes = [&](const void* target) {
    check(cudaMemcpy(check_buffer.data(), target, bytes, cudaMemcpyDefault), "cudaMemcpy check");
    std::size_t wrong = 0;
    for (unsigned char byte : check_buffer) wrong += byte != 0x5a ? 1 : 0;
    return wrong;
  };
  auto clear = [&](void* target) { check(cudaMemset(target, 0, bytes), "cudaMemset"); };
  const Hold none;
  void* vmm = vmm_buffer(bytes, false);
  void* vmm_imported = vmm_buffer(bytes, true);
  void* other_buffer = nullptr;
  check(cudaIpcOpenMemHandle(&other_buffer, other.handle, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  for (const auto& entry : kPaths) {
    void* target = entry.path == Path::D2H           ? static_cast<void*>(host)
                   : entry.path == Path::Vmm         ? vmm
                   : entry.path == Path::VmmImported ? vmm_imported
                   : entry.path == Path::IpcOther    ? other_buffer
                                                     : static_cast<void*>(dst);
    enqueue(entry.path, target, src, bytes, copy);  // warm-up
    check(cudaStreamSynchronize(copy), "cudaStreamSynchronize");
    clear(target);
    const double alone = time_copies(entry.path, target, src, bytes, copies, none, compute, copy);
    const std::size_t wrong_alone = wrong_bytes(target);
    clear(target);
    const double beside = time_copies(entry.path, target, src, bytes, copies, hold, compute, copy);
    const std::size_t wrong_beside = wrong_bytes(target);
    const std::string data = wrong_alone + wrong_beside == 0
                                 ? std::string("ok")
                                 : std::to_string(wrong_alone) + " / " + std::to_string(wrong_beside) + " bytes wrong";
    std::printf("  %-18s %12.1f %14.1f  %s\n", entry.name, alone, beside, data.c_str());
  }
  check(cudaIpcCloseMemHandle(other_buffer), "cudaIpcCloseMemHandle");
  other.stop();
  return 0;
}
