// `pickle selftest` end to end: the real command launches its own ranks, which move a pattern through exported
// memory and stream flags; every rank must report 0 wrong bytes.
#include <gtest/gtest.h>

#include <regex>

#include "bench_test_util.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

ExitStatus run_selftest(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PICKLE_CLI_PATH, "selftest"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = spawn_program(argv, {"PICKLE_TIMEOUT=20"}, dir / "out", dir / "err");
  return wait_pid_or_kill(pid, std::chrono::seconds(60));
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

TEST(Selftest, SizesTakeUnitsLikeTheBench) {
  // `--bytes 1M` once read as 1 byte (std::stoull stops at the 'M') and "passed".
  TempDir dir("selftest");
  ExitStatus status = run_selftest(dir, {"--ranks", "2", "--bytes", "1M", "--memory", "host"});
  std::string out = read_file(dir / "out");
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << out << read_file(dir / "err");
  EXPECT_NE(out.find("received 1 MiB from rank 1"), std::string::npos) << out;
}

// A size past the host's memory is refused, saying why, before anything allocates (it was a bare std::bad_alloc;
// and host memory is taken lazily, so a size that did allocate could end a rank in the OOM killer). Said once, before
// any rank starts (until 2026-11-30 each rank said it, then the launcher), with the limit per buffer.
TEST(Selftest, ASizeBeyondHostMemoryIsRefusedSayingWhy) {
  TempDir dir("selftest");
  ExitStatus status = run_selftest(dir, {"--ranks", "2", "--bytes", "1T", "--memory", "host"});
  const std::string err = read_file(dir / "err"), out = read_file(dir / "out");
  EXPECT_TRUE(status.exited && status.code == 1) << status.describe() << "\n" << err;
  EXPECT_NE(err.find("pickle selftest: --bytes 1T does not fit: the 2 ranks of this host hold 10 buffers"),
            std::string::npos) << err;
  EXPECT_NE(err.find(" each; ask for less"), std::string::npos) << err;
  EXPECT_EQ(count_of(err, "does not fit"), 1u) << err;
  EXPECT_EQ(err.find("pickle launch"), std::string::npos) << err;
  EXPECT_EQ(out.find("selftest: 2 ranks"), std::string::npos) << out;  // nothing launched
  EXPECT_EQ(err.find("bad_alloc"), std::string::npos) << err;
}

TEST(Selftest, BadOptionsExitWithTwoNamingTheFlag) {
  TempDir dir("selftest");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bytes", "0"}, "--bytes '0'"},
      {{"--bytes", "abc"}, "--bytes 'abc'"},
      {{"--bytes", "-5"}, "--bytes '-5'"},
      {{"--ranks", "1"}, "--ranks 1: must be between 2"},
      {{"--ranks", "two"}, "--ranks 'two'"},
      {{"--frobnicate"}, "pickle selftest: unknown option '--frobnicate'"},
      // Named once (until 2026-11-29j: "pickle selftest: selftest: --memory gpu").
      {{"--memory", "gpu"}, "pickle selftest: --memory gpu: use host or cuda"},
      {{"--bytes"}, "pickle selftest: --bytes needs a value"},
  };
  for (const auto& [args, message] : cases) {
    ExitStatus status = run_selftest(dir, args);
    const std::string err = read_file(dir / "err");
    EXPECT_TRUE(status.exited && status.code == 2) << args[0] << ": " << status.describe() << "\n" << err;
    EXPECT_NE(err.find(message), std::string::npos) << args[0] << ": " << err;
    EXPECT_EQ(err.find("unexpected error"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace pickle::test
