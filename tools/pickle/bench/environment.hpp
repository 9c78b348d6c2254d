#pragma once
// The environment a result was measured in, for the result file: the variables that change how pickle, NCCL or
// CUDA behave, and how much memory this host has to spare.

#include <cstdint>

#include "core/json.hpp"

namespace pickle::bench {

/// Every PICKLE_*, NCCL_* and CUDA_* variable of this process as {name: value}, sorted by name. Secrets
/// (PICKLE_TOKEN) are recorded as "(set)", never with their value.
json::Value environment_json();

/// MemAvailable of /proc/meminfo in bytes; 0 when the kernel does not say.
std::uint64_t host_memory_available();

}  // namespace pickle::bench
