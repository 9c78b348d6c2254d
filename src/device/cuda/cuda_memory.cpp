// CUDA memory: cudaMalloc (exported with cudaIpcGetMemHandle) or VMM (cuMemCreate with a POSIX fd handle), and the
// lookup of the allocation behind any device pointer, including pointers pickle did not allocate.

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <pickle/error.hpp>

#include "device/backends.hpp"
#include "device/cuda/driver_api.hpp"
#include "device/cuda/vmm.hpp"

namespace pickle::device::cuda {
namespace {

int device_attribute(int device, CUdevice_attribute attribute, const OpContext& ctx) {
  CUdevice handle = 0;
  PICKLE_CU(ctx, cuDeviceGet, &handle, device);
  int value = 0;
  PICKLE_CU(ctx, cuDeviceGetAttribute, &value, attribute, handle);
  return value;
}

bool vmm_exportable(int device, const OpContext& ctx) {
  return device_attribute(device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, ctx) != 0 &&
         device_attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, ctx) != 0;
}

/// A pointer attribute read into zeroed 8 bytes: the driver writes 4 or 8 depending on the attribute, and on a
/// little-endian machine either way reads back right.
std::uint64_t pointer_attribute(const void* ptr, CUpointer_attribute attribute, const OpContext& ctx) {
  std::uint64_t value = 0;
  PICKLE_CU(ctx, cuPointerGetAttribute, static_cast<void*>(&value), attribute, reinterpret_cast<CUdeviceptr>(ptr));
  return value;
}

/// The process-unique number behind Allocation::id(): CUDA's BUFFER_ID; should a driver not answer it for some
/// kind of memory, the physical block's id, and failing that the allocation's address (unique while it lives).
std::uint64_t local_allocation_id(const void* ptr, const void* base) {
  const DriverApi& api = driver();
  auto address = reinterpret_cast<CUdeviceptr>(ptr);
  for (CUpointer_attribute attribute : {CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID}) {
    std::uint64_t value = 0;
    if (api.cuPointerGetAttribute(&value, attribute, address) == CUDA_SUCCESS && value != 0) return value;
  }
  return reinterpret_cast<std::uint64_t>(base);
}

class MallocAllocation final : public Allocation {
 public:
  MallocAllocation(std::size_t bytes, int device, const OpContext& ctx) : bytes_(bytes), device_(device) {
    PICKLE_CUDA(ctx, cudaMalloc(&data_, bytes));
    id_ = make_allocation_id(local_allocation_id(data_, data_));
  }
  ~MallocAllocation() override {
    DeviceGuard guard(device_, std::nothrow);
    if (cudaFree(data_) != cudaSuccess) cudaGetLastError();
  }

  void* data() const noexcept override { return data_; }
  std::size_t bytes() const noexcept override { return bytes_; }
  MemoryKind kind() const noexcept override { return MemoryKind::Cuda; }
  int device() const noexcept override { return device_; }
  AllocMethod method() const noexcept override { return AllocMethod::CudaMalloc; }
  std::uint64_t id() const noexcept override { return id_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
  int device_;
  std::uint64_t id_ = 0;
};

class VmmAllocation final : public Allocation {
 public:
  VmmAllocation(std::size_t bytes, int device, const OpContext& ctx) : bytes_(bytes), device_(device) {
    CUmemAllocationProp prop = VmmMapping::properties(device);
    std::size_t granularity = 0;
    PICKLE_CU(ctx, cuMemGetAllocationGranularity, &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    std::size_t rounded = (bytes + granularity - 1) / granularity * granularity;
    // GPUDirect RDMA capability costs nothing where supported and lets the fabric transport register this memory.
    bool rdma = device_attribute(device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, ctx) != 0;
    mapping_.create(rounded, device, rdma, ctx);
    mapping_.map(granularity, device, ctx);
    id_ = make_allocation_id(local_allocation_id(data(), data()));
  }
  ~VmmAllocation() override {
    // cuMemUnmap does not wait for work in flight the way cudaFree does: wait for the device as cudaFree would.
    DeviceGuard guard(device_, std::nothrow);
    if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
  }

  void* data() const noexcept override { return reinterpret_cast<void*>(mapping_.address()); }
  std::size_t bytes() const noexcept override { return bytes_; }
  MemoryKind kind() const noexcept override { return MemoryKind::Cuda; }
  int device() const noexcept override { return device_; }
  AllocMethod method() const noexcept override { return AllocMethod::CudaVmm; }
  std::uint64_t id() const noexcept override { return id_; }

 private:
  std::size_t bytes_;
  int device_;
  VmmMapping mapping_;
  std::uint64_t id_ = 0;
};

}  // namespace

std::unique_ptr<Allocation> allocate(std::size_t bytes, int device, AllocMethod method) {
  std::string op = cat("allocate CUDA memory (", alloc_method_name(method), ") on device ", device);
  OpContext ctx{.op = op, .bytes = bytes};
  require_device(device, ctx);
  DeviceGuard guard(device);
  if (method == AllocMethod::Default) {
    method = vmm_exportable(device, ctx) ? AllocMethod::CudaVmm : AllocMethod::CudaMalloc;
  } else if (method == AllocMethod::CudaVmm && !vmm_exportable(device, ctx)) {
    throw UnavailableError(describe(ctx) + ": the device does not support VMM allocations with POSIX file "
                                           "descriptor handles");
  }
  if (method == AllocMethod::CudaVmm) return std::make_unique<VmmAllocation>(bytes, device, ctx);
  return std::make_unique<MallocAllocation>(bytes, device, ctx);
}

namespace {

/// What the VMM API says about memory mapped through it; nullopt for any other memory. cuMemRetainAllocationHandle
/// succeeds only on VMM mappings, and VMM memory is tied to no context, so the runtime's pointer attributes cannot be
/// trusted to name its device: the allocation's own properties do.
std::optional<CUmemAllocationProp> vmm_properties(const void* ptr) {
  const DriverApi& api = driver();
  if (api.cuMemRetainAllocationHandle == nullptr || api.cuMemGetAllocationPropertiesFromHandle == nullptr) {
    return std::nullopt;
  }
  CUmemGenericAllocationHandle handle = 0;
  if (api.cuMemRetainAllocationHandle(&handle, const_cast<void*>(ptr)) != CUDA_SUCCESS) return std::nullopt;
  CUmemAllocationProp prop{};
  CUresult result = api.cuMemGetAllocationPropertiesFromHandle(&prop, handle);
  api.cuMemRelease(handle);  // each retain needs its release
  if (result != CUDA_SUCCESS) return std::nullopt;
  return prop;
}

/// find_allocation's answers by CUDA's BUFFER_ID, which names one allocation for the life of the process and is never
/// reused (the allocation ids that peers cache come from it too): a later lookup of a pointer into the same allocation
/// costs one driver call instead of about eight (a collective looks up each buffer two or three times per call).
class AllocationCache {
 public:
  /// The answer for `ptr`, if its allocation was looked up before and `ptr` is inside the part found then.
  std::optional<AllocationInfo> find(std::uint64_t buffer_id, const void* ptr) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(buffer_id);
    if (it == entries_.end()) return std::nullopt;
    AllocationInfo info = it->second;
    const auto address = reinterpret_cast<std::uintptr_t>(ptr), base = reinterpret_cast<std::uintptr_t>(info.base);
    if (address < base || address - base >= info.bytes) return std::nullopt;  // another mapping of a VMM range
    info.offset = address - base;
    return info;
  }
  void insert(std::uint64_t buffer_id, const AllocationInfo& info) {
    std::lock_guard lock(mutex_);
    // Entries of freed allocations are never looked up again: start over rather than let them pile up.
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_[buffer_id] = info;
  }

 private:
  static constexpr std::size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, AllocationInfo> entries_;
};

AllocationCache& allocation_cache() {
  static AllocationCache cache;
  return cache;
}

}  // namespace

std::optional<AllocationInfo> find_allocation(const void* ptr) {
  if (ptr == nullptr || cuda_device_count() == 0) return std::nullopt;
  // BUFFER_ID answers for device memory only (without a current context); anything else takes the full lookup.
  std::uint64_t buffer_id = 0;
  if (driver().cuPointerGetAttribute(&buffer_id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(ptr)) !=
      CUDA_SUCCESS) {
    buffer_id = 0;
  }
  if (buffer_id != 0) {
    if (auto cached = allocation_cache().find(buffer_id, ptr)) return cached;
  }
  AllocationInfo info;
  info.kind = MemoryKind::Cuda;
  std::optional<CUmemAllocationProp> vmm = vmm_properties(ptr);
  if (vmm) {
    // Host-located VMM memory is not device memory: not this layer's to share.
    if (vmm->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return std::nullopt;
    info.device = vmm->location.id;
    info.method = (vmm->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0 ? AllocMethod::CudaVmm
                                                                                               : AllocMethod::Default;
  } else {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
      cudaGetLastError();
      return std::nullopt;
    }
    // Registered or pinned host memory and managed memory are not what this layer shares: only device memory.
    if (attributes.type != cudaMemoryTypeDevice) return std::nullopt;
    info.device = attributes.device;
  }

  std::string op = cat("find the CUDA allocation containing ", ptr);
  OpContext ctx{.op = op};
  DeviceGuard guard(info.device);
  auto address = reinterpret_cast<CUdeviceptr>(ptr);
  if (!vmm && pointer_attribute(ptr, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ctx) != 0) {
    info.method = AllocMethod::CudaMalloc;
    info.base = reinterpret_cast<void*>(pointer_attribute(ptr, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ctx));
    info.bytes = pointer_attribute(ptr, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ctx);
  } else {
    // Device memory that is neither cudaMalloc nor VMM (a stream-ordered pool, say) keeps method Default.
    // For VMM the reserved range (RANGE_*) may hold several mappings: the one that contains ptr is what an
    // importer maps. MAPPING_* says so directly; older drivers answer cuMemGetAddressRange instead.
    std::uint64_t base = 0;
    std::uint64_t size = 0;
    const DriverApi& api = driver();
    if (api.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, address) == CUDA_SUCCESS &&
        api.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, address) == CUDA_SUCCESS && size > 0) {
      info.base = reinterpret_cast<void*>(base);
      info.bytes = size;
    } else {
      CUdeviceptr range_base = 0;
      std::size_t range_size = 0;
      PICKLE_CU(ctx, cuMemGetAddressRange, &range_base, &range_size, address);
      info.base = reinterpret_cast<void*>(range_base);
      info.bytes = range_size;
    }
  }
  info.offset = static_cast<std::size_t>(address - reinterpret_cast<CUdeviceptr>(info.base));
  info.id = make_allocation_id(local_allocation_id(ptr, info.base));
  if (buffer_id != 0) allocation_cache().insert(buffer_id, info);
  return info;
}

}  // namespace pickle::device::cuda
