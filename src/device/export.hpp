#pragma once
// Sharing memory with another process on the same host: the exporter turns a pointer into a descriptor plus (for
// memfd and VMM memory) a file descriptor, sends both over an FdChannel, and the importer maps the allocation.
// Importing is the expensive step (1-10 ms per CUDA mapping on H200); callers cache ImportedMemory per
// (peer, descriptor.id).

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/unique_fd.hpp"
#include "device/descriptor.hpp"

namespace pickle::device {

/// What export_memory returns: send `descriptor` (serialised) and `fd` (if valid) to the importer.
struct ExportedMemory {
  MemoryDescriptor descriptor;
  UniqueFd fd;               ///< memfd (Host) or POSIX fd of the VMM allocation; none for cudaMalloc memory
  std::size_t offset = 0;    ///< offset of the exported pointer inside the allocation
};

/// Exports the allocation containing `ptr` (see find_allocation). CUDA memory that is neither cudaMalloc nor VMM
/// with a POSIX fd handle is an InvalidArgument.
ExportedMemory export_memory(const void* ptr);

/// Another process's allocation mapped into this one; unmapped (and closed, released) on destruction. The exporter
/// must keep its allocation alive until every importer has destroyed its ImportedMemory.
class ImportedMemory {
 public:
  virtual ~ImportedMemory() = default;
  ImportedMemory(const ImportedMemory&) = delete;
  ImportedMemory& operator=(const ImportedMemory&) = delete;

  /// The allocation's first byte in this process (add ExportedMemory::offset to reach the exported pointer).
  virtual void* data() const noexcept = 0;
  /// The whole allocation's size (MemoryDescriptor::bytes).
  virtual std::size_t bytes() const noexcept = 0;
  virtual const MemoryDescriptor& descriptor() const noexcept = 0;

 protected:
  ImportedMemory() = default;
};

/// Maps an exported allocation. `fd` is the descriptor's companion (required for Host and VMM, ignored otherwise);
/// `local_device` is the GPU of this process that will access CUDA memory (ignored for Host).
std::unique_ptr<ImportedMemory> import_memory(const MemoryDescriptor& descriptor, UniqueFd fd, int local_device = 0);

}  // namespace pickle::device
