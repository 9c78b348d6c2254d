#pragma once
// `pickle bench scenario`: seed 004's three tools; started alone it launches its ranks, as a rank it measures.

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs `pickle bench scenario NAME ...` with the arguments after "scenario". Returns the exit code: 0 when every
/// backend that could run passed its checks, 1 on wrong results or a failed backend, 2 on bad flags.
int run_scenario(const std::vector<std::string>& args);

}  // namespace pickle::bench
