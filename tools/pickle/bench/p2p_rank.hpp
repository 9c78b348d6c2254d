#pragma once
// One rank of `pickle bench p2p` (RANK/WORLD_SIZE/... set by the launcher).

#include <string>
#include <vector>

#include "p2p_options.hpp"

namespace pickle::bench {

/// Measures every backend x mode x size with the other ranks; rank 0 prints the table and writes --json.
/// `args` are the arguments after "p2p" (recorded in the result file). Returns the exit code: on rank 0, the run's
/// (P2pReport::exit_code, or 1 after a failed set-up); on the other ranks 0 unless they fail on their own, since
/// rank 0 reports what they agreed on. Errors that break the agreement itself (a dead peer) are thrown.
int run_p2p_rank(const P2pOptions& options, const std::vector<std::string>& args);

}  // namespace pickle::bench
