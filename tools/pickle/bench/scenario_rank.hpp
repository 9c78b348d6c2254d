#pragma once
// One rank of `pickle bench scenario` (RANK/WORLD_SIZE/... set by the launcher).

#include <string>
#include <vector>

#include "scenario_options.hpp"

namespace pickle::bench {

/// Runs the scenario with every backend in turn; rank 0 prints the results and writes --json. `args` are the
/// arguments after "scenario". Returns the exit code (run_coll_session's convention, coll_session.hpp).
int run_scenario_rank(const ScenarioOptions& options, const std::vector<std::string>& args);

}  // namespace pickle::bench
