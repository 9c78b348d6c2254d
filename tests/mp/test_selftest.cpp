// `pickle selftest` end to end: the real command launches its own ranks, which move a pattern through exported
// memory and stream flags; every rank must report 0 wrong bytes.
#include <gtest/gtest.h>

#include <regex>

#include "subprocess.hpp"

namespace pickle::test {
namespace {

ExitStatus run_selftest(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PICKLE_CLI_PATH, "selftest"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = spawn_program(argv, {"PICKLE_TIMEOUT=20"}, dir / "out", dir / "err");
  return wait_pid(pid, std::chrono::seconds(60));
}

TEST(Selftest, ThreeHostRanksMoveAnOddSizedPatternIntact) {
  TempDir dir("selftest");
  ExitStatus status = run_selftest(dir, {"--ranks", "3", "--bytes", "1000003", "--memory", "host"});
  std::string out = read_file(dir / "out");
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << out << read_file(dir / "err");
  for (int rank = 0; rank < 3; ++rank) {
    int left = (rank + 2) % 3;
    std::regex line("\\[" + std::to_string(rank) + "\\] selftest: rank " + std::to_string(rank) +
                    " received .* from rank " + std::to_string(left) + " through host memory: 0 wrong bytes");
    EXPECT_TRUE(std::regex_search(out, line)) << "rank " << rank << " did not report a clean transfer:\n" << out;
  }
  EXPECT_NE(out.find("selftest: passed"), std::string::npos) << out;
}

TEST(Selftest, BadOptionIsAnErrorNotACrash) {
  TempDir dir("selftest");
  ExitStatus status = run_selftest(dir, {"--bytes", "0"});
  EXPECT_TRUE(status.exited && status.code == 1) << status.describe();
  EXPECT_NE(read_file(dir / "err").find("--bytes must be at least 1"), std::string::npos);
}

}  // namespace
}  // namespace pickle::test
