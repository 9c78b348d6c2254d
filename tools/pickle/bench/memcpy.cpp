#include "memcpy.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "lockstep.hpp"
#include "memcpy_options.hpp"
#include "memcpy_pair.hpp"
#include "memcpy_rank.hpp"

namespace pickle::bench {

int run_memcpy(const std::vector<std::string>& args) {
  MemcpyOptions options;
  try {
    options = parse_memcpy_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench memcpy: %s\n\n%s", plain_message(e).c_str(), kMemcpyUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kMemcpyUsage, stdout);
    return 0;
  }
  if (cli::running_as_rank()) {
    return run_pair_rank("memcpy", [&](Store& store, Lockstep& lockstep) {
      return run_memcpy_rank(store, lockstep, options, args);
    });
  }
  return relaunch_pair(memcpy_plan_request(options), args);
}

}  // namespace pickle::bench
