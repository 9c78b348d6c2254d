#pragma once
// Memory of either kind: allocation (RAII) and lookup of the allocation that contains any pointer.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include <pickle/memory.hpp>

namespace pickle::device {

using pickle::MemoryKind;

/// How memory is (or was) obtained. Default picks per kind: Host -> memfd; Cuda -> VMM where the device supports
/// POSIX file descriptor export, else cudaMalloc. For memory found by find_allocation, Default on Cuda memory means
/// "neither" (a stream-ordered pool, managed memory, VMM without a shareable handle): it cannot be exported.
enum class AllocMethod : std::uint8_t {
  Default = 0,
  CudaMalloc = 1,  ///< cudaMalloc; exported with cudaIpcGetMemHandle
  CudaVmm = 2,     ///< cuMemCreate + cuMemMap; exported as a POSIX file descriptor
};

/// "default", "cudaMalloc" or "vmm".
std::string_view alloc_method_name(AllocMethod method) noexcept;

/// Memory owned by pickle; freed (unmapped, released) on destruction.
class Allocation {
 public:
  virtual ~Allocation() = default;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  /// First usable byte; host-addressable for Host, a device (UVA) address for Cuda.
  virtual void* data() const noexcept = 0;
  /// Usable bytes: what was asked for (the mapping behind it may be rounded up).
  virtual std::size_t bytes() const noexcept = 0;
  virtual MemoryKind kind() const noexcept = 0;
  /// CUDA device ordinal; -1 for host memory.
  virtual int device() const noexcept = 0;
  /// The method actually used (never Default for Cuda memory).
  virtual AllocMethod method() const noexcept = 0;
  /// Identifies the allocation: a random per-process prefix in the top 24 bits, so that ids from different
  /// processes differ with high probability, and a process-unique number below (a counter for host memory,
  /// CUDA's BUFFER_ID for GPU memory). find_allocation returns the same id for any pointer inside.
  virtual std::uint64_t id() const noexcept = 0;

 protected:
  Allocation() = default;
};

/// Allocates `bytes` (> 0, else InvalidArgument) of `kind` memory. `device` is the CUDA ordinal (ignored for Host).
/// Cuda memory without a usable GPU, or in a build without CUDA, is an UnavailableError saying why.
std::unique_ptr<Allocation> allocate(MemoryKind kind, std::size_t bytes, int device = 0,
                                     AllocMethod method = AllocMethod::Default);

/// What find_allocation learns about the allocation that contains a pointer.
struct AllocationInfo {
  void* base = nullptr;         ///< first byte of the allocation (of the mapping, for VMM)
  std::size_t bytes = 0;        ///< its size (for VMM: the mapped size, a multiple of the granularity)
  MemoryKind kind = MemoryKind::Host;
  int device = -1;              ///< CUDA ordinal, -1 for host memory
  std::uint64_t id = 0;         ///< as Allocation::id()
  AllocMethod method = AllocMethod::Default;
  std::size_t offset = 0;       ///< the pointer's offset from base
};

/// Finds the allocation that contains `ptr`, anywhere inside it (caching allocators hand out sub-ranges): host memory
/// from allocate(Host), or any CUDA device allocation in this process. Anything else is an InvalidArgument.
AllocationInfo find_allocation(const void* ptr);

/// Whether allocation `id`, which began at `base`, still exists: find_allocation(base) names it. False once it was
/// freed, even if another allocation now holds that address (it has another id). Errors other than "no allocation
/// there" answer true: a caller that unmaps what is gone must not unmap what it could not ask about.
bool allocation_alive(const void* base, std::uint64_t id) noexcept;

/// Keeps the pickle host allocation holding `ptr` mapped at its address for as long as the handle lives, even after
/// the Allocation itself is freed (the address is then not reused either). For registrations that a peer's writes
/// may still reach (the net transport's, over a software provider that copies into the registered range): the user
/// may free a buffer before the communicator that registered it. Null for anything but a pickle host allocation.
std::shared_ptr<const void> keep_host_mapping(const void* ptr);

}  // namespace pickle::device
