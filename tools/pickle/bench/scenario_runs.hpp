#pragma once
// The three scenarios of seed 004, each a function that one backend runs on every rank in step (through the
// Lockstep), plus the timing helpers they share. Each returns the same ScenarioRun on every rank.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coll_backend.hpp"
#include "coll_context.hpp"
#include "core/json.hpp"
#include "lockstep.hpp"
#include "scenario_options.hpp"
#include "scenario_report.hpp"
#include "table_text.hpp"

namespace pickle::bench {

/// The sizes a scenario runs with, decided once (after capping to memory) for every backend.
struct ScenarioPlan {
  std::size_t bytes = 0;          ///< allreduce-bench's payload; one-vs-many's big allreduce (count x small)
  std::size_t small_bytes = 0;    ///< one-vs-many's small allreduce
  int count = 0;                  ///< one-vs-many's number of small allreduces
  std::size_t scratch_bytes = 0;  ///< flags: each of the two buffers
};

/// Buffers each scenario expects in `ctx`: allreduce-bench one of plan.bytes; one-vs-many one of plan.bytes and the
/// extra one of plan.small_bytes (index 1); flags two of plan.scratch_bytes.
ScenarioRun run_allreduce_bench(CollContext& ctx, CollBackend& backend, Lockstep& lockstep,
                                const ScenarioOptions& options, const ScenarioPlan& plan);
ScenarioRun run_flags(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                      const ScenarioPlan& plan);
/// tp-pp (scenario_tp_pp.cpp): one buffer of tp_pp_buffer_bytes(options) (options settled: model, batches, seqs).
ScenarioRun run_tp_pp(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                      const ScenarioPlan& plan);
std::size_t tp_pp_buffer_bytes(const ScenarioOptions& options);
/// switchml (scenario_switchml.cpp): one buffer of options.numel int32 (options settled).
ScenarioRun run_switchml(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                         const ScenarioPlan& plan);
ScenarioRun run_one_vs_many(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                            const ScenarioPlan& plan);

// --- shared by the scenarios

/// Runs `fn` (this rank's milliseconds) as one agreed phase; the slowest rank's milliseconds, or nullopt when the
/// phase failed on some rank (lockstep.error() says why).
std::optional<double> slowest_ms(Lockstep& lockstep, std::string_view name, const std::function<double()>& fn);

/// {median, min, max, mean} of `values`.
json::Value stats_json(const std::vector<double>& values);
/// The mean of `values` (0 for none).
double mean_of(const std::vector<double>& values);

/// coll's checked data for a `coll` of `elements` of `type` (sum where it reduces; `root` for a broadcast), as the
/// scenario checks use it: tp-pp's allreduce, stage activations and tokens, switchml's int32 sums.
CollPattern scenario_pattern(const CollContext& ctx, Collective coll, DataType type, std::size_t elements, int root,
                             std::uint64_t salt);
/// What run_sum_trials measured: the slowest rank's ms of each trial (fewer than asked when a phase failed), and
/// the checked call's wrong elements (unset with -c 0 or after a failure).
struct SumTrials {
  std::vector<double> ms;
  std::optional<std::uint64_t> wrong;
};
/// allreduce-bench's and switchml's shared measurement, one step on every rank: buffer 0 of `ctx` loaded with coll's
/// data, options.warmup untimed in-place sum allreduces of `elements` of `type`, options.iterations trials of one
/// call each (each an agreed phase `trial_phase`, timed like coll), then one checked call unless -c 0. The caller
/// reads lockstep.failed() for the step's outcome.
SumTrials run_sum_trials(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                         DataType type, std::size_t elements, std::string_view trial_phase);

/// A float allreduce (sum) pattern over `elements` for the scenario checks.
CollPattern allreduce_pattern(const CollContext& ctx, std::size_t elements, std::uint64_t salt);

/// Bytes as the seed prints them: decimal GB or MB ("4.0 GB", "4.0 MB", "16.8 MB").
std::string decimal_size(std::size_t bytes);

}  // namespace pickle::bench
