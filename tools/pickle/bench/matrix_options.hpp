#pragma once
// The command line of `pickle bench matrix`: which backends and modes, how many devices, and the one message size
// of the matrix. Parsed and checked before any child starts, so that a bad flag launches nothing.

#include <cstddef>
#include <string>
#include <vector>

#include "sweep_options.hpp"

namespace pickle::bench {

/// Options of `pickle bench matrix`. -b is the matrix's size (-e may only repeat it); -n, -w and --repeats go to
/// every child only when given, so that each child keeps its own defaults.
struct MatrixOptions : SweepOptions {
  MatrixOptions() : SweepOptions{.min_bytes = 0} {}

  std::vector<std::string> backends;  ///< --backend, in the order given (default pickle,nccl,ce)
  std::vector<std::string> modes;     ///< --mode: "uni", "bi", in the order given (default both)
  int gpus = 0;                       ///< --gpus: devices of the matrix; 0: every visible GPU (3 on host memory)
  int repeats = 0;                    ///< --repeats: forwarded to every child; 0: their default
  bool iterations_given = false;      ///< -n was on the command line (forward it)
  bool warmup_given = false;          ///< -w was on the command line (forward it)

  /// The matrix's size: -b (or -e), else 1G on GPU memory and 16M on host memory, as `pickle bench p2p`'s -e.
  std::size_t size_for(const std::string& kind) const;
  bool has_mode(const std::string& mode) const;
};

/// Parses the arguments after `matrix`. Unknown flags, bad values, -f and an -e other than -b are InvalidArgument
/// (the caller turns them into exit code 2).
MatrixOptions parse_matrix_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench matrix --help`).
extern const char* const kMatrixUsage;

}  // namespace pickle::bench
