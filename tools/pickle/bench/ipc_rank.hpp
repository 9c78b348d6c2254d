#pragma once
// One rank of `pickle bench ipc`. Per method and size, rank 1 allocates a buffer, writes its pattern at both ends
// and exports it; rank 0 times import (open), release (close) and import again (re-open), and checks the pattern
// through its mapping. Then pickle's mapping cache (ipc_cache.hpp). Ranks beyond 1 only keep in step.

#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>

#include "lockstep.hpp"
#include "ipc_options.hpp"
#include "memcpy_pair.hpp"

namespace pickle::bench {

/// Measures, prints (rank 0) and returns the exit code (IpcReport::exit_code). Set-up
/// failures are AgreedFailure.
/// What ipc asks of the pair's plan (the ranks, and the process that launches them, ask the same).
PairPlanRequest ipc_plan_request(const IpcOptions& options);

int run_ipc_rank(Store& store, Lockstep& lockstep, const IpcOptions& options,
                    const std::vector<std::string>& args);

}  // namespace pickle::bench
