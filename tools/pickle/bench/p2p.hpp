#pragma once
// `pickle bench p2p`: started alone it launches its ranks; as a rank it measures.

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the p2p suite with the arguments after "p2p". Returns the exit code: 0 when every backend that could run
/// passed its checks, 1 on wrong bytes or a failed backend, 2 on bad flags.
int run_p2p(const std::vector<std::string>& args);

}  // namespace pickle::bench
