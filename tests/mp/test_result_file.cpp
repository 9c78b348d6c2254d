// What every suite's --json file shares (tools/pickle/bench/result_file.cpp).
#include <gtest/gtest.h>

#include <string>

#include "../../tools/pickle/bench/result_file.hpp"
#include "core/json.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

// A run that broke after its last row (a rank stopped in a teardown phase) wrote exit code 0 beside its rows, all
// ok, while the process exited 1. Once the run is marked broken, every file says so. (Run last in this binary: the
// mark stays for the process, as it does for a bench rank, which exits right after.)
TEST(ResultFile, ARunMarkedBrokenIsWrittenWithExitCodeOneAndItsError) {
  TempDir dir("result-file");
  json::Value before;
  before["exit_code"] = 0;
  bench::write_result_file(before, dir / "before.json");
  EXPECT_EQ(json::parse(read_file(dir / "before.json")).at("exit_code").as_int(), 0);
  EXPECT_FALSE(json::parse(read_file(dir / "before.json")).contains("broken_run"));

  bench::mark_run_broken("the ranks could not exchange how phase 'free' went");
  json::Value after;
  after["exit_code"] = 0;
  bench::write_result_file(after, dir / "after.json");
  const json::Value root = json::parse(read_file(dir / "after.json"));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  EXPECT_EQ(root.at("broken_run").as_string(), "the ranks could not exchange how phase 'free' went");
}

}  // namespace
}  // namespace pickle::test
