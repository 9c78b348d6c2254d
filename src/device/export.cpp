#include "device/export.hpp"

#include "device/backends.hpp"

namespace pickle::device {

ExportedMemory export_memory(const void* ptr) {
  AllocationInfo info = find_allocation(ptr);
  return info.kind == MemoryKind::Host ? host::export_memory(info) : cuda::export_memory(info);
}

std::unique_ptr<ImportedMemory> import_memory(const MemoryDescriptor& descriptor, UniqueFd fd, int local_device) {
  if (descriptor.kind == MemoryKind::Host) return host::import_memory(descriptor, std::move(fd));
  return cuda::import_memory(descriptor, std::move(fd), local_device);
}

}  // namespace pickle::device
