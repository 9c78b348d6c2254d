#pragma once
// The command line of `pickle bench memcpy`, parsed and checked before any rank starts.

#include <cstddef>
#include <string>
#include <vector>

namespace pickle::bench {

/// Options of `pickle bench memcpy`. -b/-e/-f/-n/-w as in nccl-tests; the default factor 4 gives the seed's rows.
struct MemcpyOptions {
  std::size_t min_bytes = 4096;  ///< -b
  std::size_t max_bytes = 0;     ///< -e; 0: 1 GiB on GPUs, 16 MiB on host memory
  std::size_t factor = 4;        ///< -f
  int iterations = 20;           ///< -n: copies timed per size and column
  int warmup = 5;                ///< -w: untimed copies before each size
  std::string method;            ///< --method: "vmm", "cudaMalloc" or "" (vmm where supported)
  std::string memory;            ///< --memory: "host", "cuda" or "" (cuda when rank 0 sees 2 GPUs or more)
  std::string csv_path;          ///< --csv: the seed's CSV table
  std::string json_path;         ///< --json
  bool help = false;
};

/// Parses the arguments after `memcpy`; bad flags are InvalidArgument (exit code 2).
MemcpyOptions parse_memcpy_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench memcpy --help`).
extern const char* const kMemcpyUsage;

}  // namespace pickle::bench
