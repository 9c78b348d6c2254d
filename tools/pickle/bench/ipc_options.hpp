#pragma once
// The command line of `pickle bench ipc`, parsed and checked before any rank starts.

#include <cstddef>
#include <string>
#include <vector>

namespace pickle::bench {

/// Options of `pickle bench ipc`. The default sweep (4K .. 4G, factor 4) gives seed 001's rows.
struct IpcOptions {
  std::size_t min_bytes = 4096;      ///< -b
  std::size_t max_bytes = 0;         ///< -e; 0: 4 GiB on GPUs, 16 MiB on host memory
  std::size_t factor = 4;            ///< -f
  int repeats = 10;                  ///< -n: timed open/close/re-open cycles per size, and steady cache transfers
  int warmup = 1;                    ///< -w: untimed cycles before each size
  std::vector<std::string> methods;  ///< --method: "cudaMalloc", "vmm" (GPU only); empty: every method of the kind
  std::string memory;                ///< --memory: "host", "cuda" or "" (cuda when rank 0 sees 2 GPUs or more)
  std::string json_path;             ///< --json
  bool help = false;
};

/// Parses the arguments after `ipc`; bad flags are InvalidArgument (exit code 2).
IpcOptions parse_ipc_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench ipc --help`).
extern const char* const kIpcUsage;

}  // namespace pickle::bench
