#pragma once
// Buffer chores of the memcpy and ipc suites, through a device::Stream so that they work on GPU and host memory
// alike: allocate as much as fits, fill with a rank's pattern (pattern.hpp), poison, count wrong bytes. Host
// staging is bounded (64 MiB), whatever the buffer size.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle::bench {

/// Allocates `bytes` of `kind` memory with `method`, halving while the GPU is out of memory, down to `floor`
/// (below that, the CudaError propagates).
std::unique_ptr<device::Allocation> allocate_up_to(MemoryKind kind, std::size_t bytes, std::size_t floor, int device,
                                                   device::AllocMethod method);

/// Enqueues and waits: dst[0, bytes) becomes `rank`'s source stream from position 0.
void fill_pattern(device::Stream& stream, void* dst, std::size_t bytes, int rank);

/// Enqueues and waits: every byte of dst[0, bytes) becomes kPoisonByte.
void poison(device::Stream& stream, void* dst, std::size_t bytes);

/// Copies src[0, bytes) back through the host and counts the bytes that differ from `sender`'s source stream at
/// position `first` + i (a multiple of 8).
std::uint64_t count_wrong_at(device::Stream& stream, const void* src, std::size_t bytes, int sender,
                             std::uint64_t first = 0);

}  // namespace pickle::bench
