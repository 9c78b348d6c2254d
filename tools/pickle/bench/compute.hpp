#pragma once
// `pickle bench compute`: the foregrounds of `pickle bench interference` (GEMM, attention) timed alone on one GPU,
// with no ranks and no traffic, so that a single-GPU machine can measure them; without a GPU it says it is waived and
// exits 0.

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the compute suite with the arguments after "compute". Returns the exit code: 0 when every foreground that
/// ran passed (or the suite is waived), 1 on a failed foreground, check or timing, 2 on bad flags.
int run_compute(const std::vector<std::string>& args);

}  // namespace pickle::bench
