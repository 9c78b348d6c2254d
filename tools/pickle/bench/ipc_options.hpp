#pragma once
// The command line of `pickle bench ipc`, parsed and checked before any rank starts.

#include <string>
#include <vector>

#include "sweep_options.hpp"

namespace pickle::bench {

/// Options of `pickle bench ipc`. The default sweep (4K .. 4G, factor 4) gives seed 001's rows. -e 0: 4 GiB on
/// GPUs, 16 MiB on host memory; -n (iterations): timed open/close/re-open cycles per size, and steady cache
/// transfers; -w: untimed cycles before each size.
struct IpcOptions : SweepOptions {
  IpcOptions() : SweepOptions{.factor = 4, .iterations = 10, .warmup = 1} {}

  std::vector<std::string> methods;  ///< --method: "cudaMalloc", "vmm" (GPU only); empty: every method of the kind
};

/// Parses the arguments after `ipc`; bad flags are InvalidArgument (exit code 2).
IpcOptions parse_ipc_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench ipc --help`).
extern const char* const kIpcUsage;

}  // namespace pickle::bench
