#include "transports.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "core/clock.hpp"
#include "core/format.hpp"
#include "lockstep.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "transports_child.hpp"
#include "transports_configs.hpp"
#include "transports_extract.hpp"
#include "transports_json.hpp"
#include "transports_options.hpp"
#include "transports_results.hpp"
#include "transports_table.hpp"

namespace pickle::bench {
namespace {

/// Whether this build's `pickle bench` has `suite`: `pickle bench <suite> --help` exits 0 exactly then.
bool has_suite(const ScratchDir& scratch, const std::string& self, const std::string& suite, std::string& why) {
  ChildOutcome outcome = run_child(self, {"bench", suite, "--help"}, current_environment(), scratch / "probe.out",
                                   scratch / "probe.err", std::chrono::seconds(60));
  if (!outcome.ok()) why = cat("this build has no `pickle bench ", suite, "` suite (`pickle bench ", suite,
                               " --help` ", outcome.describe(), ")");
  return outcome.ok();
}

void say(const std::string& text) {
  std::fprintf(stderr, "bench transports: %s\n", text.c_str());
  std::fflush(stderr);
}

/// Runs configuration `index` of `section` once (run `run`) and appends the result to it.
void run_once(const TransportsOptions& options, const ScratchDir& scratch, const std::string& self,
              const std::vector<std::string>& base_env, OpSection& section, std::size_t index, int run,
              const Stopwatch& watch) {
  ConfigRuns& c = section.configs[index];
  const Configuration& config = *c.config;
  const std::string op(op_name(section.op));
  say(cat(op, ": configuration ", index + 1, " of ", section.configs.size(), " (", config.name, "), run ", run, " of ",
          options.runs, ", ", static_cast<long long>(watch.seconds()), " s elapsed"));
  const std::string stem = cat(op, "-", config.key, "-run", run);
  const std::string json_path = scratch / (stem + ".json"), err_path = scratch / (stem + ".err");
  std::vector<std::string> args = child_arguments(options, section.op, config, json_path);
  ChildOutcome outcome = run_child(self, args, child_environment(base_env, config), scratch / (stem + ".out"),
                                   err_path, child_limit());
  RunResult result = read_child_run(section.op, config, outcome, json_path, err_path);
  result.run = run;
  result.command = {"pickle"};
  result.command.insert(result.command.end(), args.begin(), args.end());
  if (result.status == RunResult::Status::Unavailable && !c.runs.empty()) {
    // Available in an earlier run and not now: something changed under the measurement.
    result.status = RunResult::Status::Failed;
    result.detail = cat("unavailable in run ", run, " after measuring in run 1: ", result.detail);
  }
  switch (result.status) {
    case RunResult::Status::Ok: {
      char at[96] = "";
      if (!result.gbps.empty()) {
        std::snprintf(at, sizeof at, ", %.2f GB/s at %s", result.gbps.rbegin()->second,
                      short_size(result.gbps.rbegin()->first).c_str());
      }
      char took[32];
      std::snprintf(took, sizeof took, "%.1f s", result.seconds);
      say(cat("  ", config.name, " run ", run, ": ok in ", took, at));
      break;
    }
    case RunResult::Status::Unavailable:
      say(cat("  ", config.name, ": skipped, ", config.backend, " is unavailable: ", result.detail));
      break;
    case RunResult::Status::Failed: {
      say(cat("  ", config.name, " run ", run, " FAILED: ", result.detail));
      std::string tail = result.stderr_tail.empty() ? std::string("  (its stderr is empty)\n") : result.stderr_tail;
      std::fprintf(stderr, "bench transports:   its stderr, last lines:\n%s", tail.c_str());
      if (run < options.runs) say(cat("  the remaining runs of ", config.name, " are skipped"));
      std::fflush(stderr);
      break;
    }
  }
  c.runs.push_back(std::move(result));
}

int orchestrate(const TransportsOptions& options, const std::vector<std::string>& args) {
  require_writable(options.json_path);
  TransportsReport report;
  report.options = options;
  report.command = {"pickle", "bench", "transports"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = utc_now();

  ScratchDir scratch;
  const std::string self = self_executable();
  const std::vector<std::string> base_env = current_environment();
  Stopwatch watch;
  for (TransportOp op : options.ops) {
    OpSection section;
    section.op = op;
    std::string suite(child_suite(op)), why;
    if (op != TransportOp::P2p && !has_suite(scratch, self, suite, why)) {
      section.skipped = why;
      report.notes.push_back(cat(op_name(op), " skipped: ", why));
      say(cat(op_name(op), " skipped: ", why));
      report.ops.push_back(std::move(section));
      continue;
    }
    for (const auto& config : configurations()) section.configs.push_back(ConfigRuns{&config, {}});
    // Runs interleave the configurations (run 1 of each, then run 2 of each, ...), so that a drift of the machine
    // (clocks, temperature, a neighbour's load) spreads over all of them instead of biasing one.
    for (int run = 1; run <= options.runs; ++run) {
      for (std::size_t i = 0; i < section.configs.size(); ++i) {
        // A skipped (unavailable) or failed configuration is not run again.
        if (section.configs[i].status() != ConfigRuns::Status::Ok) continue;
        run_once(options, scratch, self, base_env, section, i, run, watch);
      }
    }
    report.ops.push_back(std::move(section));
  }
  for (const auto& section : report.ops) {
    for (const auto& c : section.configs) {
      for (const auto& run : c.runs) {
        if (report.memory.empty() && !run.memory.empty()) report.memory = run.memory;
        if (report.world_size == 0) report.world_size = run.world_size;
      }
    }
  }
  if (report.memory == "host" && options.lanes.empty()) {
    report.notes.push_back("host memory: no copy engine and no NCCL; the pickle rows move data with memcpy through "
                           "the same transports (ipc: the peer's mapped buffer; shm: a staging ring)");
  } else if (report.memory == "host") {
    report.notes.push_back("host memory: no NCCL; the pickle rows write host memory straight from the net "
                           "transport's registrations (GPU memory would be staged through pinned buffers)");
  }

  print_transports_tables(report, stdout);
  // Only now, with every child done, may this process touch CUDA (the topology in the result file).
  if (!options.json_path.empty()) write_result_file(transports_to_json(report), options.json_path);
  say(cat("done in ", static_cast<long long>(watch.seconds()), " s", report.exit_code() == 0 ? "" : "; FAILED"));
  return report.exit_code();
}

}  // namespace

int run_transports(const std::vector<std::string>& args) {
  TransportsOptions options;
  try {
    options = parse_transports_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench transports: %s\n\n%s", plain_message(e).c_str(), kTransportsUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kTransportsUsage, stdout);
    return 0;
  }
  if (cli::running_as_rank()) {
    // Its children would take this job's rank variables for theirs.
    std::fprintf(stderr, "pickle bench transports: starts its own process sets; run it alone, not as a rank of a "
                         "launcher (RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID is set)\n");
    return 2;
  }
  choose_configurations(options);
  try {
    // Else each child would fail alone, configuration after configuration.
    cli::refuse_cuda_memory_without_gpu(options.memory);
    return orchestrate(options, args);
  } catch (const Error& e) {
    std::fprintf(stderr, "pickle bench transports: %s\n", plain_message(e).c_str());
    return 1;
  }
}

}  // namespace pickle::bench
