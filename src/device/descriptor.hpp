#pragma once
// The serialisable half of exported memory: what an importer needs, besides the file descriptor (if any), to map
// another process's allocation. Sent over the fd channel or the store, so parsing trusts nothing.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "device/memory.hpp"

namespace pickle::device {

/// Describes one exported allocation (not a sub-range: the offset travels beside it).
struct MemoryDescriptor {
  MemoryKind kind = MemoryKind::Host;
  AllocMethod method = AllocMethod::Default;  ///< Default for Host, CudaMalloc or CudaVmm for Cuda
  int device = -1;                            ///< the exporter's CUDA ordinal, -1 for host memory
  std::uint32_t pid = 0;                      ///< the exporting process (diagnostics)
  std::uint64_t bytes = 0;                    ///< size of the whole allocation
  std::uint64_t id = 0;                       ///< Allocation::id() in the exporter: a cache key with the peer
  std::uint64_t base = 0;                     ///< the allocation's address in the exporter: a cache key too
  std::array<std::byte, 64> ipc_handle{};     ///< cudaIpcMemHandle_t, only for Cuda + CudaMalloc

  /// Whether ipc_handle is meaningful (and serialised).
  bool has_ipc_handle() const noexcept { return kind == MemoryKind::Cuda && method == AllocMethod::CudaMalloc; }
};

/// Serialised size without / with the 64-byte IPC handle.
inline constexpr std::size_t kDescriptorBytes = 40;
inline constexpr std::size_t kDescriptorBytesWithHandle = kDescriptorBytes + 64;

/// Fixed little-endian layout with a magic number and a version.
std::vector<std::byte> serialize(const MemoryDescriptor& descriptor);

/// The inverse of serialize. Truncated, oversized, unknown-version or inconsistent input is a ProtocolError.
MemoryDescriptor parse_descriptor(std::span<const std::byte> bytes);

}  // namespace pickle::device
