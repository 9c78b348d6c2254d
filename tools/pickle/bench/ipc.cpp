#include "ipc.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "lockstep.hpp"
#include "ipc_options.hpp"
#include "memcpy_pair.hpp"
#include "ipc_rank.hpp"

namespace pickle::bench {

int run_ipc(const std::vector<std::string>& args) {
  IpcOptions options;
  try {
    options = parse_ipc_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench ipc: %s\n\n%s", plain_message(e).c_str(), kIpcUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kIpcUsage, stdout);
    return 0;
  }
  if (cli::running_as_rank()) {
    return run_pair_rank("ipc", [&](Store& store, Lockstep& lockstep) {
      return run_ipc_rank(store, lockstep, options, args);
    });
  }
  return relaunch_pair(ipc_plan_request(options), args);
}

}  // namespace pickle::bench
