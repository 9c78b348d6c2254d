#pragma once
// `pickle bench interference`: started alone it launches its ranks; as a rank it measures; with fewer than 2 GPUs
// it says it is waived and exits 0.

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the interference suite with the arguments after "interference". Returns the exit code: 0 when every row
/// that ran passed (or the suite is waived), 1 on a failed row, check or set-up, 2 on bad flags.
int run_interference(const std::vector<std::string>& args);

}  // namespace pickle::bench
