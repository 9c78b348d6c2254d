#include "p2p.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "lockstep.hpp"
#include "p2p_options.hpp"
#include "p2p_rank.hpp"
#include "result_file.hpp"
#include "transports.hpp"
#include "transports_configs.hpp"

namespace pickle::bench {
namespace {

/// `--lanes`: seed 001's "bandwidth vs number of QPs" is `bench transports --ops p2p --lanes`, which runs each library
/// forced onto its network path as process sets of its own (NCCL reads the socket count once, at initialisation).
/// Its flags are p2p's sweep flags, so they are handed over as they are.
int run_lane_comparison(const std::vector<std::string>& args) {
  std::vector<std::string> transports_args = {"--ops", "p2p"};
  transports_args.insert(transports_args.end(), args.begin(), args.end());
  std::fprintf(stderr, "bench p2p: --lanes: running `pickle bench transports --ops p2p` with the same flags\n");
  std::fflush(stderr);
  return run_transports(transports_args);
}

}  // namespace

int run_p2p(const std::vector<std::string>& args) {
  P2pOptions options;
  try {
    options = parse_p2p_options(args);
    if (!options.lanes.empty()) parse_lane_counts(options.lanes);  // a bad list is p2p's usage error
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench p2p: %s\n\n%s", plain_message(e).c_str(), kP2pUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kP2pUsage, stdout);
    return 0;
  }
  if (!options.lanes.empty()) return run_lane_comparison(args);
  if (cli::running_as_rank()) return run_p2p_rank(options, args);

  // Before any rank starts (the ranks check again, for a launcher of their own): said once, nothing launched.
  require_writable(options.json_path);
  std::string why;
  int ranks = cli::default_rank_count(options.ranks, options.memory, why);
  std::fprintf(stderr, "bench p2p: %s\n", why.c_str());
  std::fflush(stderr);
  std::vector<std::string> rank_args = {"p2p"};
  rank_args.insert(rank_args.end(), args.begin(), args.end());
  // Unprefixed: rank 0 alone prints the table, and the other ranks' errors name their rank themselves.
  return cli::relaunch_as_ranks(ranks, "bench", rank_args, /*prefix_output=*/false);
}

}  // namespace pickle::bench
