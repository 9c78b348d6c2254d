#pragma once
// `pickle bench memcpy`: started alone it launches its two ranks; as a rank it measures (memcpy_rank.hpp).

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the memcpy suite with the arguments after "memcpy". Returns the exit code: 0 when every size ran with no
/// wrong byte, 1 on wrong bytes or a failure, 2 on bad flags (a GPU-only option on host memory included).
int run_memcpy(const std::vector<std::string>& args);

}  // namespace pickle::bench
