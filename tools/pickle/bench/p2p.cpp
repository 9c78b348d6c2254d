#include "p2p.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "lockstep.hpp"
#include "p2p_options.hpp"
#include "p2p_rank.hpp"

namespace pickle::bench {

int run_p2p(const std::vector<std::string>& args) {
  P2pOptions options;
  try {
    options = parse_p2p_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench p2p: %s\n\n%s", plain_message(e).c_str(), kP2pUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kP2pUsage, stdout);
    return 0;
  }
  if (cli::running_as_rank()) return run_p2p_rank(options, args);

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
