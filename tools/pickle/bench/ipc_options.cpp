#include "ipc_options.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

const char* const kIpcUsage =
    "usage: pickle bench ipc [-b 4K] [-e 4G] [-f 4] [-n 10] [-w 1] [--method cudaMalloc,vmm]\n"
    "                        [--memory host|cuda] [--json FILE]\n"
    "\n"
    "The cost of mapping another process's memory (seed 001's cudaIpcMemHandle table): rank 1 allocates a buffer\n"
    "of each size with each method and exports it (cudaMalloc: cudaIpc handle; vmm: POSIX fd; host: memfd); rank 0\n"
    "times the import (open), the release (close) and a second import (re-open), and checks the mapped bytes.\n"
    "Then pickle's mapping cache: a 4 KiB Communicator send/recv into one allocation, first transfer (it maps the\n"
    "allocation) vs the steady state (cache hit), with the mappings each one opened.\n"
    "\n"
    "  -b SIZE        smallest buffer (4K; bytes or K/M/G/T)\n"
    "  -e SIZE        largest buffer (4G on GPUs, 16M on host memory; sizes that do not fit are skipped)\n"
    "  -f FACTOR      multiply the size by FACTOR between rows (4)\n"
    "  -n N           timed open/close/re-open cycles per size, and steady-state cache transfers (10)\n"
    "  -w N           untimed cycles before each size (1)\n"
    "  --method LIST  GPU allocation methods, comma-separated: cudaMalloc, vmm (default: both)\n"
    "  --memory KIND  host or cuda (default: cuda when rank 0 sees at least 2 GPUs)\n"
    "  --json FILE    write every measurement, the environment and the topology as JSON (docs/bench.md)\n";

IpcOptions parse_ipc_options(const std::vector<std::string>& args) {
  IpcOptions options;
  FlagReader in(args);
  while (in.next()) {
    if (parse_sweep_flag(in, options, 100'000)) continue;
    if (in.flag() == "--method") {
      options.methods = split_list(in.value(), "--method");
      for (const auto& method : options.methods) {
        if (method != "cudaMalloc" && method != "vmm") {
          throw InvalidArgument(cat("--method: unknown method '", method, "' (choose from cudaMalloc, vmm)"));
        }
      }
    } else {
      in.unknown();
    }
  }
  if (options.memory == "host" && !options.methods.empty()) {
    throw InvalidArgument("--method picks how GPU memory is allocated; host memory is always a memfd: leave "
                          "--method out with --memory host");
  }
  settle_sweep_range(options);
  return options;
}

}  // namespace pickle::bench
