#pragma once
// `pickle bench interference --lanes LIST`: seed 001's "RDMA P2P vs compute" (item 4: relative compute throughput vs
// the number of QPs, pickle vs NCCL) where the two libraries' network paths are forced onto one host. An
// orchestrator: one child process set per lane count and backend (interference_lanes_args.hpp), read back into one
// report (interference_lanes_merge.hpp) that prints as the suite's table with a lanes column and writes one result
// file.

#include <string>
#include <vector>

#include "interference_options.hpp"

namespace pickle::bench {

/// Runs every child of `options` (its --lanes set) one at a time, prints the merged table, writes --json. `args`:
/// the user's arguments after "interference". Returns the merged report's exit code (0: every child's rows passed;
/// 1: a child or row failed). Throws Error when a child cannot be started or the result file cannot be written.
int run_interference_lanes(const InterferenceOptions& options, const std::vector<std::string>& args);

}  // namespace pickle::bench
