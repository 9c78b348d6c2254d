#pragma once
// The CUDA virtual memory management steps, each undone in reverse order by one RAII object: a physical allocation
// handle (created here or imported from a POSIX fd), a reserved address range, the mapping, and access rights.
// Used by both VMM allocation and VMM import.

#include <cstdint>

#include "device/cuda/driver_api.hpp"

namespace pickle::device::cuda {

class VmmMapping {
 public:
  VmmMapping() = default;
  VmmMapping(const VmmMapping&) = delete;
  VmmMapping& operator=(const VmmMapping&) = delete;
  ~VmmMapping() { reset(); }

  /// Allocates `bytes` (a multiple of the granularity) of physical memory on `device`, exportable as a POSIX fd.
  void create(std::size_t bytes, int device, bool gpu_direct_rdma, const OpContext& ctx) {
    CUmemAllocationProp prop = properties(device);
    if (gpu_direct_rdma) prop.allocFlags.gpuDirectRDMACapable = 1;
    PICKLE_CU(ctx, cuMemCreate, &handle_, bytes, &prop, 0ull);
    has_handle_ = true;
    size_ = bytes;
  }

  /// Takes the physical allocation behind a POSIX fd exported by another process (the fd stays the caller's).
  void import(int fd, std::size_t bytes, const OpContext& ctx) {
    // The POSIX fd travels in the pointer argument itself, as the driver API documents.
    void* os_handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd));
    PICKLE_CU(ctx, cuMemImportFromShareableHandle, &handle_, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    has_handle_ = true;
    size_ = bytes;
  }

  /// Reserves an address range, maps the whole allocation there, and gives `access_device` read-write access.
  void map(std::size_t alignment, int access_device, const OpContext& ctx) {
    PICKLE_CU(ctx, cuMemAddressReserve, &address_, size_, alignment, CUdeviceptr{0}, 0ull);
    reserved_ = true;
    PICKLE_CU(ctx, cuMemMap, address_, size_, std::size_t{0}, handle_, 0ull);
    mapped_ = true;
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = access_device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    PICKLE_CU(ctx, cuMemSetAccess, address_, size_, &access, std::size_t{1});
  }

  CUdeviceptr address() const noexcept { return address_; }
  std::size_t size() const noexcept { return size_; }

  /// The properties of a device-local allocation that can be exported as a POSIX file descriptor.
  static CUmemAllocationProp properties(int device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
  }

 private:
  void reset() noexcept {
    // Failures here cannot be reported (destructor); the driver frees everything at process exit anyway.
    const DriverApi& api = driver_or_null();
    if (mapped_ && api.cuMemUnmap != nullptr) api.cuMemUnmap(address_, size_);
    if (reserved_ && api.cuMemAddressFree != nullptr) api.cuMemAddressFree(address_, size_);
    if (has_handle_ && api.cuMemRelease != nullptr) api.cuMemRelease(handle_);
    mapped_ = reserved_ = has_handle_ = false;
  }

  static const DriverApi& driver_or_null() noexcept {
    static const DriverApi empty{};
    try {
      return driver();
    } catch (...) {
      return empty;
    }
  }

  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr address_ = 0;
  std::size_t size_ = 0;
  bool has_handle_ = false;
  bool reserved_ = false;
  bool mapped_ = false;
};

}  // namespace pickle::device::cuda
