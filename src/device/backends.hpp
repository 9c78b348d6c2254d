#pragma once
// The two backends behind memory.hpp, export.hpp and stream.hpp. The dispatch files (memory.cpp, export.cpp,
// stream.cpp) pick one by MemoryKind; this header names no CUDA type, so that a build without CUDA links
// no_cuda.cpp in place of cuda/*.cpp.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/unique_fd.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"
#include "device/host_registration.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle::device {

/// Number of usable CUDA devices; 0 (never an exception) with no CUDA build, no driver or no GPU.
int cuda_device_count() noexcept;
/// Why cuda_device_count() is 0, e.g. "no NVIDIA driver (cudaErrorInsufficientDriver: ...)"; "" when GPUs exist.
std::string cuda_unavailable_reason();

/// The PCI bus id ("0000:19:00.0") of CUDA device `device`. CudaError on failure, UnavailableError without CUDA.
std::string cuda_pci_bus_id(int device);
/// Whether `device`'s copy engines can write memory of the GPU whose PCI bus id is `peer_bus_id` once it is mapped:
/// the same GPU, or a GPU with CUDA peer access (cudaDeviceCanAccessPeer). When not, `why` says why (the GPU is not
/// visible to this process, or CUDA refuses peer access between the two).
bool cuda_peer_reachable(int device, const std::string& peer_bus_id, std::string& why);
/// Flags of write_value/wait_value: non-null and 4-byte aligned (CUDA's 32-bit stream memory operations need it,
/// and the host backend's atomics too). InvalidArgument naming `op` otherwise.
void check_flag_address(const void* addr, std::string_view op);

/// A process-wide id for an allocation: a random 24-bit per-process prefix above the low 40 bits of `local`.
std::uint64_t make_allocation_id(std::uint64_t local) noexcept;

namespace host {
std::unique_ptr<Allocation> allocate(std::size_t bytes);
std::optional<AllocationInfo> find_allocation(const void* ptr);
/// Ownership of the mapping of the host allocation holding `ptr` (null when none does): see device::keep_host_mapping.
std::shared_ptr<const void> keep_mapping(const void* ptr);
ExportedMemory export_memory(const AllocationInfo& info);
std::unique_ptr<ImportedMemory> import_memory(const MemoryDescriptor& descriptor, UniqueFd fd);
std::unique_ptr<Stream> make_stream();
std::unique_ptr<Event> make_event();
}  // namespace host

namespace cuda {
std::unique_ptr<Allocation> allocate(std::size_t bytes, int device, AllocMethod method);
/// nullopt when the pointer is not CUDA device memory (or CUDA is absent).
std::optional<AllocationInfo> find_allocation(const void* ptr);
ExportedMemory export_memory(const AllocationInfo& info);
std::unique_ptr<ImportedMemory> import_memory(const MemoryDescriptor& descriptor, UniqueFd fd, int local_device);
std::unique_ptr<Stream> make_stream(int device);
/// `timing`: false for an event that only orders streams (cudaEventDisableTiming).
std::unique_ptr<Event> make_event(int device, bool timing);
std::unique_ptr<HostRegistration> register_host_memory(void* ptr, std::size_t bytes, int device);
}  // namespace cuda

}  // namespace pickle::device
