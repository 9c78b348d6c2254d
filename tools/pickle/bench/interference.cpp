#include "interference.hpp"

#include <algorithm>
#include <cstdio>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"
#include "interference_lanes.hpp"
#include "interference_options.hpp"
#include "interference_plan.hpp"
#include "interference_report.hpp"
#include "lockstep.hpp"
#include "result_file.hpp"
#if PICKLE_HAVE_CUDA
#include "interference_rank.hpp"
#endif

namespace pickle::bench {
namespace {

/// Rank 0, or a process started alone, speaks for the job; other ranks of a waived job stay silent.
bool speaks_for_job() {
  if (!cli::running_as_rank()) return true;
  try {
    return discover_rank_info().rank == 0;
  } catch (const Error&) {
    return true;  // an incomplete launcher environment: better a line too many than none
  }
}

/// The waiver: one line on stdout (and the result file, so that a sweep of suites keeps a record of it), exit 0.
int waive(const InterferenceOptions& options, const std::vector<std::string>& args, int gpus, const std::string& why) {
  if (!speaks_for_job()) return 0;
  InterferenceReport report;
  report.options = options;
  report.command = {"pickle", "bench", "interference"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = utc_now();
  report.waived = why;
  if (gpus == 0) {
    std::string reason = device::cuda_unavailable_reason();
    if (!reason.empty()) report.notes.push_back(cat("no GPU: ", reason));
  }
  print_interference_table(report, stdout);
  if (!options.json_path.empty()) write_result_file(interference_to_json(report), options.json_path);
  return 0;
}

/// The ranks of a job of `world_size` that take part, `local_world_size` of them on this host: those that need a
/// GPU here. A --ranks beyond the job is left to the ranks to report (exit 2); counted as the job then.
int local_ranks_taking_part(const InterferenceOptions& options, int world_size, int local_world_size) {
  InterferenceOptions within = options;
  within.ranks = std::min(options.ranks, world_size);
  return std::min(InterferencePlan(within, world_size).ranks_taking_part(), local_world_size);
}

/// How many ranks to launch when started alone: --ranks, else one per GPU; 2 on one GPU with --share-gpus.
int launch_count(const InterferenceOptions& options, int gpus, std::string& why) {
  if (options.ranks == 0 && options.share_gpus && gpus == 1) {
    why = "only 1 GPU: 2 ranks sharing it (--share-gpus)";
    return 2;
  }
  return cli::default_rank_count(options.ranks, options.memory, why);
}

}  // namespace

int run_interference(const std::vector<std::string>& args) {
  InterferenceOptions options;
  try {
    options = parse_interference_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench interference: %s\n\n%s", plain_message(e).c_str(), kInterferenceUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kInterferenceUsage, stdout);
    return 0;
  }
  if (!options.lanes.empty() && cli::running_as_rank()) {
    // --lanes starts its own process sets, whose ranks would take this job's rank variables for theirs.
    std::fprintf(stderr, "pickle bench interference: --lanes starts its own process sets; run it alone, not as a rank "
                         "of a launcher (RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID is set)\n");
    return 2;
  }
  // Counting GPUs initialises CUDA in this process; ranks are started by fork + exec, so that is safe.
  const int gpus = device::cuda_device_count();
  if (!cli::running_as_rank()) {
    std::string why;
    const int ranks = launch_count(options, gpus, why);
    if (std::string waiver = interference_waiver(options, local_ranks_taking_part(options, ranks, ranks), gpus);
        !waiver.empty()) {
      return waive(options, args, gpus, waiver);
    }
    if (!options.lanes.empty()) {
      // The children meet the same waiver (same GPUs, same flags), so none starts where it would say so.
      try {
        return run_interference_lanes(options, args);
      } catch (const Error& e) {
        std::fprintf(stderr, "pickle bench interference: %s\n", plain_message(e).c_str());
        return 1;
      }
    }
    std::fprintf(stderr, "bench interference: %s\n", why.c_str());
    std::fflush(stderr);
    std::vector<std::string> rank_args = {"interference"};
    rank_args.insert(rank_args.end(), args.begin(), args.end());
    // Unprefixed: rank 0 alone prints the table, and the other ranks' errors name their rank themselves.
    return cli::relaunch_as_ranks(ranks, "bench", rank_args, /*prefix_output=*/false);
  }
  int local_ranks = 2;
  try {
    const RankInfo self = discover_rank_info();
    local_ranks = local_ranks_taking_part(options, self.world_size, self.local_world_size);
  } catch (const Error&) {
    // An incomplete launcher environment: the ranks' own start reports it.
  }
  if (std::string waiver = interference_waiver(options, local_ranks, gpus); !waiver.empty()) {
    return waive(options, args, gpus, waiver);
  }
#if PICKLE_HAVE_CUDA
  return run_interference_rank(options, args);
#else
  return waive(options, args, 0, "needs a CUDA build");  // unreachable: a build without CUDA counts no GPU
#endif
}

}  // namespace pickle::bench
