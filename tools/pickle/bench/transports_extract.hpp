#pragma once
// Reading back one child of `pickle bench transports` or `pickle bench matrix`: its exit, its result file (`pickle
// bench p2p|coll --json`, docs/bench.md) and its stderr become one RunResult per backend (and p2p mode): the per-size
// medians, or why there are none.

#include <string>
#include <utility>
#include <vector>

#include "transports_child.hpp"
#include "transports_configs.hpp"
#include "transports_results.hpp"

namespace pickle::bench {

/// What to read from a child's result file, and how failures name the child.
struct ChildMeasurement {
  TransportOp op = TransportOp::P2p;
  std::string backend;       ///< the backend whose results count
  std::string mode = "uni";  ///< p2p: the mode whose results count
  /// Variables the child's `environment` must record, besides kCommonEnv (proof that the child saw them).
  std::vector<std::pair<std::string, std::string>> env;
  std::string who;  ///< the start of a failure's detail: "`pickle bench p2p --backend nccl` "
  /// The child measured other backends too, so its exit code 1 may be theirs: then this backend's own record in the
  /// result file decides. Any other end of the child (a signal, a time-out, another code) still fails it.
  bool shared = false;
};

/// The measurement as the child reported it; the rules of read_child_run below, with `what` in place of the
/// configuration (and exit code 1 accepted when `what.shared` and the backend's own record is clean).
RunResult read_child_measurement(const ChildMeasurement& what, const ChildOutcome& outcome,
                                 const std::string& json_path, const std::string& stderr_path);

/// The run as the child reported it. Ok needs all of: exit code 0, a result file that parses, the configuration's
/// backend "ok" in it, at least one measurement, no failed step, no wrong byte, and the configuration's environment
/// recorded in the file (proof that the child saw it). A backend the child reports "unavailable" (exit 0) is
/// Unavailable with the child's reason. Everything else is Failed, with a detail that names the child's command,
/// how it ended and what its result file says went wrong; the stderr tail is kept for failures. `run` and
/// `command` are left for the caller.
RunResult read_child_run(TransportOp op, const Configuration& config, const ChildOutcome& outcome,
                         const std::string& json_path, const std::string& stderr_path);

}  // namespace pickle::bench
