#include "coll.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "coll_options.hpp"
#include "coll_rank.hpp"
#include "lockstep.hpp"
#include "parallel_parts.hpp"
#include "result_file.hpp"

namespace pickle::bench {

int run_coll(const std::vector<std::string>& args) {
  CollOptions options;
  try {
    options = parse_coll_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench coll: %s\n\n%s", plain_message(e).c_str(), kCollUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kCollUsage, stdout);
    return 0;
  }
  if (cli::running_as_rank()) return run_coll_rank(options, args);

  // Before any rank starts (the ranks check again, for a launcher of their own): said once, nothing launched.
  require_writable(options.json_path);
  std::string why;
  int ranks = cli::default_rank_count(options.ranks, options.memory, why);
  if (options.root >= ranks) {
    std::fprintf(stderr, "pickle bench coll: -r %d: the root must be a rank below %d\n\n%s", options.root, ranks,
                 kCollUsage);
    return 2;
  }
  check_threads(ranks);  // a bad PICKLE_BENCH_CHECK_THREADS is said once, before any rank starts
  std::fprintf(stderr, "bench coll: %s\n", why.c_str());
  std::fflush(stderr);
  std::vector<std::string> rank_args = {"coll"};
  rank_args.insert(rank_args.end(), args.begin(), args.end());
  // Unprefixed: rank 0 alone prints the table, and the other ranks' errors name their rank themselves.
  return cli::relaunch_as_ranks(ranks, "bench", rank_args, /*prefix_output=*/false);
}

}  // namespace pickle::bench
