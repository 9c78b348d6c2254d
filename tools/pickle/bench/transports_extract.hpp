#pragma once
// Reading back one child of `pickle bench transports`: its exit, its result file (`pickle bench p2p|coll --json`,
// docs/bench.md) and its stderr become one RunResult: the per-size medians, or why there are none.

#include <string>

#include "transports_child.hpp"
#include "transports_configs.hpp"
#include "transports_results.hpp"

namespace pickle::bench {

/// The run as the child reported it. Ok needs all of: exit code 0, a result file that parses, the configuration's
/// backend "ok" in it, at least one measurement, no failed step, no wrong byte, and the configuration's environment
/// recorded in the file (proof that the child saw it). A backend the child reports "unavailable" (exit 0) is
/// Unavailable with the child's reason. Everything else is Failed, with a detail that names the child's command,
/// how it ended and what its result file says went wrong; the stderr tail is kept for failures. `run` and
/// `command` are left for the caller.
RunResult read_child_run(TransportOp op, const Configuration& config, const ChildOutcome& outcome,
                         const std::string& json_path, const std::string& stderr_path);

}  // namespace pickle::bench
