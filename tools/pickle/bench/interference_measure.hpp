#pragma once
// The measurement of `pickle bench interference`: one background x backend over every foreground and size, each row
// in the phases of interference_rank.cpp's file comment, every rank in step (Lockstep). CUDA builds only.

#include <string>

#include "interference_rank_state.hpp"
#include "interference_report.hpp"
#include "progress.hpp"

namespace pickle::bench {

/// Probes and sets up `background` through `backend` on the ranks taking part, measures every foreground (that is
/// ok) at every size of report.sizes that the background runs, and tears it down; appends the TrafficRun and the
/// rows to `report`. Every rank calls it with the same arguments; a failed row ends this backend on every rank.
/// When the ranks can no longer agree (LockstepBroken), the row and the backend it cut off are appended as failed, the
/// backend is left as it is (Lockstep::end_broken_run) and the exception goes on.
void run_traffic(RankState& s, InterferenceReport& report, const std::string& background, const std::string& backend,
                 Progress& progress);

}  // namespace pickle::bench
