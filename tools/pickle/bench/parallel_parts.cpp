#include "parallel_parts.hpp"

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "topology/probes.hpp"

namespace pickle::bench {

int check_threads(int local_ranks) {
  if (env::get_if_set("PICKLE_BENCH_CHECK_THREADS")) {
    const long long threads = env::get_int("PICKLE_BENCH_CHECK_THREADS");
    if (threads < 1 || threads > 64) {
      throw InvalidArgument(cat("PICKLE_BENCH_CHECK_THREADS=", threads, ": must be between 1 and 64"));
    }
    return static_cast<int>(threads);
  }
  int cpus = topology::cpus_allowed();
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cpus / std::max(local_ranks, 1), 1, 16);
}

}  // namespace pickle::bench
