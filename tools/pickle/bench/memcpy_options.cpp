#include "memcpy_options.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "p2p_options.hpp"
#include "sizes.hpp"

namespace pickle::bench {

const char* const kMemcpyUsage =
    "usage: pickle bench memcpy [-b 4K] [-e 1G] [-f 4] [-n 20] [-w 5] [--method vmm|cudaMalloc]\n"
    "                           [--memory host|cuda] [--csv FILE] [--json FILE]\n"
    "\n"
    "Plain stream copies from rank 0 into rank 1's buffer, mapped into rank 0 (seed 001's cudaMemcpyAsync table):\n"
    "  async without overhead  back-to-back copies on one stream, events around -n of them\n"
    "  sync without overhead   each copy followed by a stream synchronize (host clock per copy)\n"
    "  sync with overhead      per copy: import rank 1's buffer, copy, synchronize, release the mapping\n"
    "After each column, rank 1 counts the bytes of its buffer that differ from rank 0's pattern (#wrong, must be 0).\n"
    "\n"
    "  -b SIZE         smallest chunk (4K; bytes or K/M/G/T)\n"
    "  -e SIZE         largest chunk (1G on GPUs, 16M on host memory; capped by free memory)\n"
    "  -f FACTOR       multiply the chunk size by FACTOR between rows (4)\n"
    "  -n N            copies timed per chunk size and column (20)\n"
    "  -w N            untimed copies before each chunk size (5)\n"
    "  --method M      how rank 1 allocates its buffer on GPUs: vmm (POSIX fd) or cudaMalloc (cudaIpc handle);\n"
    "                  default vmm where the GPU supports it\n"
    "  --memory KIND   host or cuda (default: cuda when rank 0 sees at least 2 GPUs)\n"
    "  --csv FILE      write the seed's CSV table\n"
    "  --json FILE     write every measurement, the environment and the topology as JSON (docs/bench.md)\n";

MemcpyOptions parse_memcpy_options(const std::vector<std::string>& args) {
  MemcpyOptions options;
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
      options.iterations = static_cast<int>(parse_int(value(), "-n", 1, 1'000'000));
    } else if (flag == "-w") {
      options.warmup = static_cast<int>(parse_int(value(), "-w", 0, 1'000'000));
    } else if (flag == "--method") {
      options.method = value();
      if (options.method != "vmm" && options.method != "cudaMalloc") {
        throw InvalidArgument(cat("--method '", options.method, "': use vmm or cudaMalloc"));
      }
    } else if (flag == "--memory") {
      options.memory = value();
      if (options.memory != "host" && options.memory != "cuda") {
        throw InvalidArgument(cat("--memory '", options.memory, "': use host or cuda"));
      }
    } else if (flag == "--csv") {
      options.csv_path = value();
    } else if (flag == "--json") {
      options.json_path = value();
    } else if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else {
      throw InvalidArgument(cat("unknown option '", flag, "'"));
    }
  }
  if (options.memory == "host" && !options.method.empty()) {
    throw InvalidArgument(cat("--method ", options.method, " picks how GPU memory is allocated; host memory is "
                              "always a memfd: leave --method out with --memory host"));
  }
  if (options.max_bytes != 0 && options.min_bytes > options.max_bytes) {
    if (min_given) throw InvalidArgument(cat("-b ", options.min_bytes, " is larger than -e ", options.max_bytes));
    options.min_bytes = options.max_bytes;  // only -e was given, below the default -b: run that one size
  }
  return options;
}

}  // namespace pickle::bench
