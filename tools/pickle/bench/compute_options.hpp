#pragma once
// The command line of `pickle bench compute`, parsed and checked before any GPU is touched (bad flags: exit 2,
// whether or not the machine has a GPU).

#include <cstddef>
#include <string>
#include <vector>

#include "foreground_options.hpp"

namespace pickle::bench {

/// Bytes of one copy of --copy-load: at 400 GB/s one every 168 us, long enough for the pacing thread's sleeps.
inline constexpr std::size_t kCopyLoadChunkBytes = std::size_t{64} << 20;

/// Options of `pickle bench compute`: the foregrounds of `pickle bench interference`, timed alone on one GPU.
struct ComputeOptions {
  std::vector<std::string> foregrounds;           ///< --foreground, in the order given (default: all)
  AttentionImpl attention = AttentionImpl::Auto;  ///< --attention
  int iterations = 20;                            ///< -n: iterations between the two CUDA events of one repeat
  int warmup = 5;                                 ///< -w: untimed iterations before the first repeat
  int repeats = 5;                                ///< -r: timed repeats; the table shows their median
  /// --warmup-ms: the warm-up also lasts at least this long (a GPU under full load lowers its clocks after a few
  /// hundred ms, as interference's --warmup-ms explains).
  int warmup_ms = 1000;
  int device = 0;                                 ///< --device: the GPU's CUDA index
  /// --copy-load: GB/s of copies inside the GPU beside a second series of repeats (compute_copy_load.hpp); 0: none.
  double copy_load_gbps = 0;
  std::string json_path;                          ///< --json
  bool help = false;                              ///< -h, --help
};

/// Parses the arguments after `compute`. Unknown flags and bad values are InvalidArgument (exit code 2).
ComputeOptions parse_compute_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench compute --help`).
extern const char* const kComputeUsage;

}  // namespace pickle::bench
