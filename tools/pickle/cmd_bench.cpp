// `pickle bench <suite> [options]`: the benchmark suites. Each suite lives in bench/ and parses its own options;
// this file only picks the suite. Exit codes: 0 passed, 1 a check or a backend failed, 2 bad command line.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include <pickle/error.hpp>

#include "bench/coll.hpp"
#include "bench/compute.hpp"
#include "bench/interference.hpp"
#include "bench/ipc.hpp"
#include "bench/matrix.hpp"
#include "bench/memcpy.hpp"
#include "bench/p2p.hpp"
#include "bench/scenario.hpp"
#include "bench/transports.hpp"
#include "commands.hpp"
#include "core/env.hpp"

namespace pickle::cli {
namespace {

struct Suite {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* summary;
};

constexpr Suite kSuites[] = {
    {"p2p", bench::run_p2p, "point-to-point bandwidth and latency between two ranks: pickle vs NCCL vs copy engine"},
    {"ipc", bench::run_ipc, "cost of mapping a peer's buffer (cudaIpc, VMM fd, memfd) and what pickle's cache saves"},
    {"memcpy", bench::run_memcpy, "plain copies into a peer's mapped buffer: async, sync, sync with IPC open+close"},
    {"coll", bench::run_coll, "collectives the nccl-tests way (allreduce, allgather, ...): pickle vs NCCL"},
    {"scenario", bench::run_scenario, "seed 004's allreduce-bench, flags (all_gather_object vs allreduce), one-vs-many"},
    {"interference", bench::run_interference, "compute on the receiving GPU alone vs under background traffic"},
    {"compute", bench::run_compute, "interference's foregrounds (GEMM, attention) timed alone on one GPU"},
    {"transports", bench::run_transports, "seed 000: NCCL P2P vs SHM and pickle ipc vs shm, each in its own process set"},
    {"matrix", bench::run_matrix, "all-pairs P2P bandwidth matrix (uni and bi), pickle vs NCCL vs copy engine"},
};

void bench_usage(std::FILE* out) {
  std::fprintf(out, "usage: pickle bench [<suite>] [options]\n\nWith no suite, runs the default suite (%s).\n\nsuites:\n",
               kSuites[0].name);
  for (const auto& suite : kSuites) std::fprintf(out, "  %-12s %s\n", suite.name, suite.summary);
  std::fprintf(out, "\n`pickle bench <suite> --help` describes a suite's options; docs/bench.md the method.\n");
}

}  // namespace

int cmd_bench(const Args& args) {
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    bench_usage(stdout);
    return 0;
  }
  // Every suite's ranks and children read PICKLE_TIMEOUT, and the checking suites' the test hook
  // PICKLE_BENCH_CORRUPT: a bad value is a set-up error (exit 1), said once here, before a suite prints its progress
  // or takes the error for a bad command line (or for a failure of the phase that reads it). A --help still answers.
  const bool wants_help = std::any_of(args.begin(), args.end(), [](const std::string& arg) {
    return arg == "-h" || arg == "--help";
  });
  if (!wants_help) {
    env::timeout_seconds();
    env::get_bool("PICKLE_BENCH_CORRUPT");
  }
  if (args.empty() || args[0].starts_with("-")) {
    // No suite named: the default suite (the first of the table) with the options given.
    std::printf("# pickle bench: running the default suite, %s\n", kSuites[0].name);
    std::fflush(stdout);
    return kSuites[0].run(args);
  }
  for (const auto& suite : kSuites) {
    if (args[0] != suite.name) continue;
    try {
      return suite.run(Args(args.begin() + 1, args.end()));
    } catch (const Error& e) {
      // A set-up error said before or outside the suite's own frame (an unwritable --json checked before launching,
      // a broken exchange before the first size): named with the suite, as the suites' own errors are.
      std::fprintf(stderr, "pickle bench %s: %s\n", suite.name, e.message().c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "pickle bench: unknown suite '%s'\n\n", args[0].c_str());
  bench_usage(stderr);
  return 2;
}

}  // namespace pickle::cli
