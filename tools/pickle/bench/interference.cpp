#include "interference.hpp"

#include <cstdio>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"
#include "interference_options.hpp"
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
int waive(const InterferenceOptions& options, const std::vector<std::string>& args, int gpus) {
  if (!speaks_for_job()) return 0;
  InterferenceReport report;
  report.options = options;
  report.command = {"pickle", "bench", "interference"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = utc_now();
  report.waived = cat("needs 2 CUDA GPUs (found ", gpus, ")");
  if (gpus == 0) {
    std::string why = device::cuda_unavailable_reason();
    if (!why.empty()) report.notes.push_back(cat("no GPU: ", why));
  }
  print_interference_table(report, stdout);
  if (!options.json_path.empty()) write_result_file(interference_to_json(report), options.json_path, "interference");
  return 0;
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
  // Counting GPUs initialises CUDA in this process; ranks are started by fork + exec, so that is safe.
  const int gpus = device::cuda_device_count();
  if (gpus < 2) return waive(options, args, gpus);
  if (!cli::running_as_rank()) {
    std::string why;
    int ranks = cli::default_rank_count(options.ranks, why);
    std::fprintf(stderr, "bench interference: %s\n", why.c_str());
    std::fflush(stderr);
    std::vector<std::string> rank_args = {"interference"};
    rank_args.insert(rank_args.end(), args.begin(), args.end());
    // Unprefixed: rank 0 alone prints the table, and the other ranks' errors name their rank themselves.
    return cli::relaunch_as_ranks(ranks, "bench", rank_args, /*prefix_output=*/false);
  }
#if PICKLE_HAVE_CUDA
  return run_interference_rank(options, args);
#else
  return waive(options, args, 0);  // unreachable: a build without CUDA counts no GPU
#endif
}

}  // namespace pickle::bench
