#include "ipc_options.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "p2p_options.hpp"
#include "sizes.hpp"

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
  bool min_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw InvalidArgument(cat(flag, " needs a value"));
      return args[++i];
    };
    if (flag == "-b") {
      options.min_bytes = parse_size(value(), "-b");
      min_given = true;
    } else if (flag == "-e") {
      options.max_bytes = parse_size(value(), "-e");
    } else if (flag == "-f") {
      options.factor = static_cast<std::size_t>(parse_int(value(), "-f", 2, 1 << 20));
    } else if (flag == "-n") {
      options.repeats = static_cast<int>(parse_int(value(), "-n", 1, 100'000));
    } else if (flag == "-w") {
      options.warmup = static_cast<int>(parse_int(value(), "-w", 0, 100'000));
    } else if (flag == "--method") {
      options.methods = split_list(value(), "--method");
      for (const auto& method : options.methods) {
        if (method != "cudaMalloc" && method != "vmm") {
          throw InvalidArgument(cat("--method: unknown method '", method, "' (choose from cudaMalloc, vmm)"));
        }
      }
    } else if (flag == "--memory") {
      options.memory = value();
      if (options.memory != "host" && options.memory != "cuda") {
        throw InvalidArgument(cat("--memory '", options.memory, "': use host or cuda"));
      }
    } else if (flag == "--json") {
      options.json_path = value();
    } else if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else {
      throw InvalidArgument(cat("unknown option '", flag, "'"));
    }
  }
  if (options.memory == "host" && !options.methods.empty()) {
    throw InvalidArgument("--method picks how GPU memory is allocated; host memory is always a memfd: leave "
                          "--method out with --memory host");
  }
  if (options.max_bytes != 0 && options.min_bytes > options.max_bytes) {
    if (min_given) throw InvalidArgument(cat("-b ", options.min_bytes, " is larger than -e ", options.max_bytes));
    options.min_bytes = options.max_bytes;
  }
  return options;
}

}  // namespace pickle::bench
