#include "scenario.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "core/format.hpp"
#include "lockstep.hpp"
#include "parallel_parts.hpp"
#include "result_file.hpp"
#include "scenario_options.hpp"
#include "scenario_rank.hpp"

namespace pickle::bench {

int run_scenario(const std::vector<std::string>& args) {
  ScenarioOptions options;
  try {
    options = parse_scenario_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench scenario: %s\n\n%s", plain_message(e).c_str(), kScenarioUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kScenarioUsage, stdout);
    return 0;
  }
  if (cli::running_as_rank()) return run_scenario_rank(options, args);

  // Before any rank starts (the ranks check again, for a launcher of their own): said once, nothing launched.
  require_writable(options.json_path);
  std::string why;
  // tp-pp runs TP=2 and PP=2: two ranks, whatever the number of GPUs.
  const bool two = options.scenario == Scenario::TpPp;
  int ranks = cli::default_rank_count(options.ranks, options.memory, why);
  if (two && ranks != 2) {
    why = cat("2 ranks (tp-pp runs TP=2 and PP=2; ", why, ")");
    ranks = 2;
  }
  check_threads(ranks);  // a bad PICKLE_BENCH_CHECK_THREADS is said once, before any rank starts
  std::fprintf(stderr, "bench scenario: %s\n", why.c_str());
  std::fflush(stderr);
  std::vector<std::string> rank_args = {"scenario"};
  rank_args.insert(rank_args.end(), args.begin(), args.end());
  return cli::relaunch_as_ranks(ranks, "bench", rank_args, /*prefix_output=*/false);
}

}  // namespace pickle::bench
