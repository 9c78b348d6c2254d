#pragma once
// Reading back one child of `pickle bench interference --lanes` into the merged report: its result file (suite
// "interference", written by the same code, interference_report.hpp), its exit and its stderr. Every row and traffic
// run of the child gets the child's lane count and environment; a child that failed, or whose file cannot be used,
// becomes a failed traffic run that says why, never a missing one.

#include <string>

#include "interference_lanes_args.hpp"
#include "interference_report.hpp"
#include "transports_child.hpp"

namespace pickle::bench {

/// Adds `child`'s results to `report`: its foregrounds (the first child's, a worse status of a later child winning
/// with that child named), rows, traffic run, sizes, notes (each once), world size and gpus_shared. Its traffic run
/// for its backend keeps the child's status and detail (an unavailable backend says why, from the file, or from the
/// child's stderr when the file does not) unless the child failed: it did not exit 0 or 1, exited 1 without its file
/// saying what failed, exited with another code than its file records, wrote no usable file, left out its backend's
/// traffic run, or did not record the configuration's environment (proof that it saw it). Then the traffic run is
/// failed, with how the child ended, what was wrong and the last lines of its stderr.
void merge_lanes_child(InterferenceReport& report, const LanesChild& child, const ChildOutcome& outcome,
                       const std::string& json_path, const std::string& stderr_path);

/// The last `max_lines` lines of a child's stderr on one line (" | " between them), for a traffic run's detail.
std::string stderr_summary(const std::string& stderr_path, int max_lines);

}  // namespace pickle::bench
