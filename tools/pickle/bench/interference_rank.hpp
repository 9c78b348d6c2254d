#pragma once
// One rank of `pickle bench interference` (RANK/WORLD_SIZE/... set by the launcher). p2p: rank 1 runs the
// foregrounds and receives the background, rank 0 sends it; allgather: each of its ranks gathers and runs the
// foregrounds; ranks that take part in no background only keep in step (interference_plan.hpp). CUDA builds only.

#include <string>
#include <vector>

#include "interference_options.hpp"

namespace pickle::bench {

/// Measures every background x backend x foreground x size; rank 0 prints the table and writes --json. Returns the
/// exit code (rank 0: the run's; other ranks 0 unless they fail on their own).
int run_interference_rank(const InterferenceOptions& options, const std::vector<std::string>& args);

}  // namespace pickle::bench
