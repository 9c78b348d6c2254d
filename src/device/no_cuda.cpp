// The CUDA backend of a build without CUDA: every request for GPU memory or streams says so plainly.

#include <pickle/error.hpp>

#include "device/backends.hpp"

namespace pickle::device {
namespace {

[[noreturn]] void unavailable() { throw UnavailableError("pickle was built without CUDA"); }

}  // namespace

int cuda_device_count() noexcept { return 0; }
std::string cuda_unavailable_reason() { return "pickle was built without CUDA"; }
std::string cuda_pci_bus_id(int) { unavailable(); }
bool cuda_peer_reachable(int, const std::string&, std::string& why) {
  why = "pickle was built without CUDA";
  return false;
}

namespace cuda {
std::unique_ptr<Allocation> allocate(std::size_t, int, AllocMethod) { unavailable(); }
std::optional<AllocationInfo> find_allocation(const void*) { return std::nullopt; }
ExportedMemory export_memory(const AllocationInfo&) { unavailable(); }
std::unique_ptr<ImportedMemory> import_memory(const MemoryDescriptor&, UniqueFd, int) { unavailable(); }
std::unique_ptr<Stream> make_stream(int) { unavailable(); }
std::unique_ptr<Event> make_event(int, bool) { unavailable(); }
std::unique_ptr<HostRegistration> register_host_memory(void*, std::size_t, int) { unavailable(); }
}  // namespace cuda

}  // namespace pickle::device
