// Sharing CUDA memory with another process: cudaMalloc memory as a 64-byte cudaIpcMemHandle (inside the
// descriptor), VMM memory as a POSIX file descriptor (passed over an FdChannel). Either way the importer pays
// 1-10 ms to map it on H200 (docs/device.md), which is why callers cache imports.

#include <unistd.h>

#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include <pickle/error.hpp>

#include "device/backends.hpp"
#include "device/cuda/driver_api.hpp"
#include "device/cuda/vmm.hpp"

namespace pickle::device::cuda {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(MemoryDescriptor::ipc_handle));

// CUDA opens a cudaIpcMemHandle once per process and device: opening it again while it is open fails with
// "resource already mapped" (CUDA's documentation: a handle may be opened by one context per device per other
// process). Two communicators of one process may both receive from one peer allocation, so the imports of one
// handle share one mapping, closed when the last of them goes.
struct SharedIpcMapping {
  void* data = nullptr;
  std::uint64_t allocation_id = 0;  // the exporter's allocation, to tell a handle that came round again
  int users = 0;
};
using IpcMappingKey = std::pair<std::array<std::byte, 64>, int>;  // the handle, the local device

std::mutex& ipc_mappings_mutex() {
  static auto* mutex = new std::mutex;  // never destroyed, like the map it guards
  return *mutex;
}
std::map<IpcMappingKey, SharedIpcMapping>& ipc_mappings() {
  static auto* mappings = new std::map<IpcMappingKey, SharedIpcMapping>;  // never destroyed: imports may outlive exit
  return *mappings;
}

class IpcImport final : public ImportedMemory {
 public:
  IpcImport(const MemoryDescriptor& descriptor, int local_device, const OpContext& ctx)
      : descriptor_(descriptor), device_(local_device), key_(descriptor.ipc_handle, local_device) {
    // The lock is held across the open (milliseconds) so that two threads never open one handle at once.
    std::lock_guard lock(ipc_mappings_mutex());
    SharedIpcMapping& shared = ipc_mappings()[key_];
    if (shared.users > 0 && shared.allocation_id != descriptor.id) {
      throw InvalidArgument(cat(describe(ctx), ": the handle of allocation ", descriptor.id, " is still open "
                                "for the exporter's freed allocation ", shared.allocation_id, " (another "
                                "communicator of this process keeps it mapped)"));
    }
    if (shared.users == 0) {
      cudaIpcMemHandle_t handle;
      std::memcpy(&handle, descriptor.ipc_handle.data(), sizeof handle);
      // Lazy peer access: the driver enables P2P between the two devices when the mapping is first used.
      cudaError_t opened = cudaIpcOpenMemHandle(&shared.data, handle, cudaIpcMemLazyEnablePeerAccess);
      if (opened != cudaSuccess) {
        ipc_mappings().erase(key_);
        runtime_check(opened, "cudaIpcOpenMemHandle(&data, handle, cudaIpcMemLazyEnablePeerAccess)", ctx);
      }
      shared.allocation_id = descriptor.id;
    }
    ++shared.users;
    data_ = shared.data;
  }
  ~IpcImport() override {
    std::lock_guard lock(ipc_mappings_mutex());
    auto it = ipc_mappings().find(key_);
    if (it == ipc_mappings().end() || --it->second.users > 0) return;
    ipc_mappings().erase(it);
    DeviceGuard guard(device_, std::nothrow);
    if (cudaIpcCloseMemHandle(data_) != cudaSuccess) cudaGetLastError();
  }
  void* data() const noexcept override { return data_; }
  std::size_t bytes() const noexcept override { return descriptor_.bytes; }
  const MemoryDescriptor& descriptor() const noexcept override { return descriptor_; }

 private:
  MemoryDescriptor descriptor_;
  int device_;
  IpcMappingKey key_;
  void* data_ = nullptr;
};

class VmmImport final : public ImportedMemory {
 public:
  VmmImport(const MemoryDescriptor& descriptor, UniqueFd fd, int local_device, const OpContext& ctx)
      : descriptor_(descriptor), device_(local_device) {
    if (!fd) throw InvalidArgument(describe(ctx) + ": no file descriptor came with the VMM descriptor");
    CUmemAllocationProp prop = VmmMapping::properties(local_device);
    std::size_t granularity = 0;
    PICKLE_CU(ctx, cuMemGetAllocationGranularity, &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (granularity == 0 || descriptor.bytes % granularity != 0) {
      throw ProtocolError(describe(ctx) + cat(": the size is not a multiple of the granularity (", granularity, ")"));
    }
    mapping_.import(fd.get(), descriptor.bytes, ctx);
    // The imported handle holds the memory now; the fd is closed when `fd` goes out of scope.
    mapping_.map(granularity, local_device, ctx);
  }
  ~VmmImport() override {
    // Unmapping does not wait for copies in flight into this memory: let this device's work finish first.
    DeviceGuard guard(device_, std::nothrow);
    if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
  }
  void* data() const noexcept override { return reinterpret_cast<void*>(mapping_.address()); }
  std::size_t bytes() const noexcept override { return descriptor_.bytes; }
  const MemoryDescriptor& descriptor() const noexcept override { return descriptor_; }

 private:
  MemoryDescriptor descriptor_;
  int device_;
  VmmMapping mapping_;
};

/// Releases a handle obtained from cuMemRetainAllocationHandle (each retain needs its release).
struct RetainedHandle {
  CUmemGenericAllocationHandle handle = 0;
  bool held = false;
  ~RetainedHandle() {
    if (held) driver().cuMemRelease(handle);
  }
};

}  // namespace

ExportedMemory export_memory(const AllocationInfo& info) {
  std::string op = cat("export CUDA memory (", alloc_method_name(info.method), ") at ", info.base, " on device ",
                       info.device);
  OpContext ctx{.op = op, .bytes = info.bytes};
  DeviceGuard guard(info.device);
  ExportedMemory out;
  out.offset = info.offset;
  out.descriptor = MemoryDescriptor{.kind = MemoryKind::Cuda,
                                    .method = info.method,
                                    .device = info.device,
                                    .pid = static_cast<std::uint32_t>(getpid()),
                                    .bytes = info.bytes,
                                    .id = info.id,
                                    .base = reinterpret_cast<std::uint64_t>(info.base)};
  switch (info.method) {
    case AllocMethod::CudaMalloc: {
      cudaIpcMemHandle_t handle;
      PICKLE_CUDA(ctx, cudaIpcGetMemHandle(&handle, info.base));
      std::memcpy(out.descriptor.ipc_handle.data(), &handle, sizeof handle);
      return out;
    }
    case AllocMethod::CudaVmm: {
      RetainedHandle retained;
      PICKLE_CU(ctx, cuMemRetainAllocationHandle, &retained.handle, info.base);
      retained.held = true;
      int fd = -1;
      PICKLE_CU(ctx, cuMemExportToShareableHandle, static_cast<void*>(&fd), retained.handle,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull);
      out.fd.reset(fd);
      return out;
    }
    case AllocMethod::Default: break;
  }
  throw InvalidArgument(describe(ctx) + ": only cudaMalloc memory and VMM memory with a POSIX file descriptor "
                                        "handle can be exported (not stream-ordered pools or other VMM memory)");
}

std::unique_ptr<ImportedMemory> import_memory(const MemoryDescriptor& descriptor, UniqueFd fd, int local_device) {
  std::string op = cat("import CUDA memory (", alloc_method_name(descriptor.method), ") of process ", descriptor.pid,
                       " device ", descriptor.device, " on device ", local_device);
  OpContext ctx{.op = op, .bytes = descriptor.bytes};
  require_device(local_device, ctx);
  DeviceGuard guard(local_device);
  if (descriptor.method == AllocMethod::CudaMalloc) return std::make_unique<IpcImport>(descriptor, local_device, ctx);
  if (descriptor.method == AllocMethod::CudaVmm) {
    return std::make_unique<VmmImport>(descriptor, std::move(fd), local_device, ctx);
  }
  throw InvalidArgument(describe(ctx) + ": unknown method");
}

}  // namespace pickle::device::cuda
