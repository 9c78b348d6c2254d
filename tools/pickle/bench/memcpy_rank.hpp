#pragma once
// One rank of `pickle bench memcpy`. Rank 1 allocates and exports a buffer; rank 0 maps it and copies its pattern
// into it with plain stream copies, three ways per chunk size (the seed's columns); rank 1 checks its buffer after
// each column. Ranks beyond 1 only keep in step.

#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>

#include "lockstep.hpp"
#include "memcpy_options.hpp"
#include "memcpy_pair.hpp"

namespace pickle::bench {

/// What memcpy asks of the pair's plan (the ranks, and the process that launches them, ask the same).
PairPlanRequest memcpy_plan_request(const MemcpyOptions& options);

/// Measures, prints (rank 0) and returns the exit code (0, or 1 when a size failed or a byte was wrong). Set-up
/// failures are AgreedFailure.
int run_memcpy_rank(Store& store, Lockstep& lockstep, const MemcpyOptions& options,
                    const std::vector<std::string>& args);

}  // namespace pickle::bench
