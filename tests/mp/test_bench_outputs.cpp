// Every suite that writes a result file checks that it can before it measures anything: a --json (or memcpy's
// --csv) in a folder that does not exist fails at once, naming the flag and the file, instead of after a sweep whose
// results could then not be saved (compute found out only at its end).
#include <gtest/gtest.h>

#include <algorithm>

#include "bench_test_util.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

TEST(BenchOutputs, AFileThatCannotBeWrittenFailsBeforeAnythingIsMeasured) {
  TempDir dir("bench-outputs");
  const std::string nowhere = dir / "no-such-folder/result.json";
  struct Case {
    std::string suite;
    std::vector<std::string> args;
    std::string flag;
  };
  const std::vector<Case> cases = {
      {"p2p", {"-b", "4K", "-e", "4K", "--json", nowhere}, "--json"},
      {"coll", {"-b", "4K", "-e", "4K", "--json", nowhere}, "--json"},
      {"memcpy", {"-b", "4K", "-e", "4K", "--json", nowhere}, "--json"},
      {"memcpy", {"-b", "4K", "-e", "4K", "--csv", nowhere}, "--csv"},
      {"ipc", {"-b", "4K", "-e", "4K", "--json", nowhere}, "--json"},
      {"scenario", {"flags", "--json", nowhere}, "--json"},
      {"compute", {"--json", nowhere}, "--json"},
      {"transports", {"--ops", "p2p", "-b", "4K", "-e", "4K", "--json", nowhere}, "--json"},
      {"matrix", {"--json", nowhere}, "--json"},
  };
  for (const auto& c : cases) {
    const std::string what = c.suite + " " + c.flag;
    BenchRun run = run_bench(dir, c.suite, c.args);
    EXPECT_TRUE(run.status.exited && run.status.code == 1) << what << ": " << run.describe();
    EXPECT_NE(run.err.find("cannot write the " + c.flag + " file " + nowhere + ": No such file or directory"),
              std::string::npos)
        << what << ": " << run.err;
    // Nothing was measured: no table row (but compute's waiver, said at once where there is no GPU), no child
    // configuration started.
    for (const auto& row : table_rows(run.out)) {
      EXPECT_NE(std::find(row.begin(), row.end(), "waived:"), row.end()) << what << ": " << run.out;
    }
    EXPECT_EQ(run.err.find("configuration 1 of"), std::string::npos) << what << ": " << run.err;
    // Said once, named with its suite, before any rank started: no launcher line, no "running 2 ranks" (until
    // 2026-11-30 the self-launching suites found it in their ranks, and the launcher added "rank 0 exited with code 1").
    EXPECT_EQ(count_of(run.err, "cannot write the " + c.flag), 1u) << what << ": " << run.err;
    EXPECT_NE(run.err.find("pickle bench " + c.suite + ": "), std::string::npos) << what << ": " << run.err;
    EXPECT_EQ(run.err.find("pickle launch"), std::string::npos) << what << ": " << run.err;
    EXPECT_EQ(run.err.find(" ranks"), std::string::npos) << what << ": " << run.err;
  }
}

// A failure that every rank finds after the launch (here: each checks PICKLE_TIMEOUT again under the self-launch's
// check, so use a set-up failure of the suite itself) is said by the ranks; the launcher adds no line of its own.
TEST(BenchOutputs, ASelfLaunchedRunThatFailsInItsRanksGetsNoLauncherLine) {
  TempDir dir("bench-outputs");
  BenchRun run = run_bench(dir, "coll", {"-b", "4K", "-e", "4K", "--memory", "host", "--backend", "pickle"},
                           {"PICKLE_ALLREDUCE_SCHEDULE=sideways", "PICKLE_BENCH_CORRUPT=1"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  EXPECT_EQ(run.err.find("pickle launch:"), std::string::npos) << run.describe();
}

}  // namespace
}  // namespace pickle::test
