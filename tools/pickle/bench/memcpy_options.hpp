#pragma once
// The command line of `pickle bench memcpy`, parsed and checked before any rank starts.

#include <string>
#include <vector>

#include "sweep_options.hpp"

namespace pickle::bench {

/// Options of `pickle bench memcpy`. -b/-e/-f/-n/-w as in nccl-tests; the default factor 4 gives the seed's rows.
/// -e 0: 1 GiB on GPUs, 16 MiB on host memory; -n: copies timed per size and column; -w: untimed copies before
/// each size.
struct MemcpyOptions : SweepOptions {
  MemcpyOptions() : SweepOptions{.factor = 4, .iterations = 20, .warmup = 5} {}

  std::string method;    ///< --method: "vmm", "cudaMalloc" or "" (vmm where supported)
  std::string csv_path;  ///< --csv: the seed's CSV table
};

/// Parses the arguments after `memcpy`; bad flags are InvalidArgument (exit code 2).
MemcpyOptions parse_memcpy_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench memcpy --help`).
extern const char* const kMemcpyUsage;

}  // namespace pickle::bench
