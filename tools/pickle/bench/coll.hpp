#pragma once
// `pickle bench coll`: started alone it launches its ranks; as a rank it measures.

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the coll suite with the arguments after "coll". Returns the exit code: 0 when every backend that could run
/// passed its checks, 1 on wrong results or a failed backend, 2 on bad flags.
int run_coll(const std::vector<std::string>& args);

}  // namespace pickle::bench
