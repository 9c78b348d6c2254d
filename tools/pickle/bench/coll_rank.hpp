#pragma once
// One rank of `pickle bench coll` (RANK/WORLD_SIZE/... set by the launcher).

#include <string>
#include <vector>

#include "coll_options.hpp"

namespace pickle::bench {

/// Measures every backend x collective x datatype x operator x size with the other ranks; rank 0 prints the table
/// and writes --json. `args` are the arguments after "coll" (recorded in the result file). Returns the exit code
/// (run_coll_session's convention, coll_session.hpp).
int run_coll_rank(const CollOptions& options, const std::vector<std::string>& args);

}  // namespace pickle::bench
