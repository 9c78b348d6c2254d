#pragma once
// `pickle bench ipc`: started alone it launches its two ranks; as a rank it measures (ipc_rank.hpp).

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the ipc suite with the arguments after "ipc". Returns the exit code: 0 when every measurement ran, its
/// mapped bytes were right and the cache's steady state opened nothing; 1 otherwise; 2 on bad flags.
int run_ipc(const std::vector<std::string>& args);

}  // namespace pickle::bench
