#pragma once
// The environment a result was measured in, for the result file: the variables that change how pickle, NCCL or
// CUDA behave, and how much memory this host has to spare.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <pickle/memory.hpp>

#include "core/json.hpp"

namespace pickle::bench {

/// Every PICKLE_*, NCCL_* and CUDA_* variable of this process as {name: value}, sorted by name. Secrets
/// (PICKLE_TOKEN) are recorded as "(set)", never with their value.
json::Value environment_json();

/// This host's name (gethostname); "?" when it cannot be read.
std::string hostname();

/// MemAvailable of /proc/meminfo in bytes; 0 when the kernel does not say.
std::uint64_t host_memory_available();

/// The most bytes each of `buffers` host buffers may take so that together they leave a quarter of `available`
/// (MemAvailable) to everything else: host memory is taken lazily, and buffers that took all of it had the kernel's
/// OOM killer end a rank, with no word of why (all of it was allowed until 2026-11-29j). The bound of every refusal
/// of a size too large for host memory (bench suites, selftest).
std::uint64_t host_buffer_room(std::uint64_t available, std::uint64_t buffers);

/// The buffer size to try first for a sweep over `sizes` (ascending, not empty): the largest, except on host memory,
/// where the ranks share one host: there the largest of `sizes` within a tenth of MemAvailable (two ranks of three
/// buffers: six tenths, leaving the rest to everything else), but never below the smallest.
/// The smallest beyond an eighth of MemAvailable (six buffers within three quarters of it) is refused
/// (UnavailableError).
std::size_t sweep_buffer_bytes(MemoryKind kind, const std::vector<std::size_t>& sizes);

/// Throws UnavailableError, naming the size and the limit, when `smallest` bytes exceed `room` (described by `room_is`).
void refuse_beyond_memory(std::size_t smallest, std::uint64_t room, std::string_view room_is);

}  // namespace pickle::bench
