#include "memcpy_options.hpp"

#include <filesystem>
#include <optional>
#include <system_error>

#include <pickle/error.hpp>

#include "core/format.hpp"

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

namespace {

/// Whether two names lead to one file ("r" and "./r"; the file need not exist yet). Made absolute first:
/// weakly_canonical leaves a relative name whose first part does not exist as it is ("r"), and makes "./r" absolute.
bool same_file_name(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  auto resolved = [](const std::string& name) -> std::optional<std::filesystem::path> {
    std::error_code error;
    const std::filesystem::path absolute = std::filesystem::absolute(name, error);
    if (error) return std::nullopt;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(absolute, error);
    if (error) return std::nullopt;
    return canonical;
  };
  const auto resolved_a = resolved(a), resolved_b = resolved(b);
  return resolved_a && resolved_b ? *resolved_a == *resolved_b : a == b;
}

}  // namespace

MemcpyOptions parse_memcpy_options(const std::vector<std::string>& args) {
  MemcpyOptions options;
  FlagReader in(args);
  while (in.next()) {
    if (parse_sweep_flag(in, options, 1'000'000)) continue;
    if (in.flag() == "--method") {
      options.method = in.value();
      if (options.method != "vmm" && options.method != "cudaMalloc") {
        throw InvalidArgument(cat("--method '", options.method, "': use vmm or cudaMalloc"));
      }
    } else if (in.flag() == "--csv") {
      options.csv_path = in.file_value();
    } else {
      in.unknown();
    }
  }
  if (options.memory == "host" && !options.method.empty()) {
    throw InvalidArgument(cat("--method ", options.method, " picks how GPU memory is allocated; host memory is "
                              "always a memfd: leave --method out with --memory host"));
  }
  if (!options.csv_path.empty() && same_file_name(options.csv_path, options.json_path)) {
    throw InvalidArgument(cat("--csv and --json name the same file, '", options.csv_path,
                              "': the one written last would replace the other"));
  }
  settle_sweep_range(options);
  return options;
}

}  // namespace pickle::bench
