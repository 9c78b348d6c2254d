// What every suite's --json file shares (tools/pickle/bench/result_file.cpp).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/result_file.hpp"
#include "core/json.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

// A FIFO or a folder named as the result file is refused at once (opening a FIFO to write waited for a reader: the
// run hung before it began); a regular file, present or not, passes and is left as it was.
TEST(ResultFile, OnlyARegularFileOrNoneIsAcceptedBeforeARun) {
  TempDir dir("result-file-kinds");
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string(dir.str())}) {
    try {
      bench::require_writable(path);
      FAIL() << path << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write the --json file " + path +
                                           ": it exists and is not a regular file"),
                std::string::npos)
          << e.what();
    }
  }
  bench::require_writable(dir / "new.json");
  EXPECT_FALSE(std::filesystem::exists(dir / "new.json")) << "the probe leaves no empty file behind";
  std::ofstream(dir / "old.json") << "kept";
  bench::require_writable(dir / "old.json");
  EXPECT_EQ(read_file(dir / "old.json"), "kept");
}

// The result replaces an earlier file whole, through a complete copy renamed over it: nothing partial is left.
TEST(ResultFile, AResultReplacesTheEarlierFileWholeAndLeavesNoPartialCopy) {
  TempDir dir("result-file-replace");
  std::ofstream(dir / "r.json") << "an earlier result";
  json::Value root;
  root["exit_code"] = 0;
  bench::write_result_file(root, dir / "r.json");
  EXPECT_EQ(json::parse(read_file(dir / "r.json")).at("exit_code").as_int(), 0);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.str())) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"r.json"});
}

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
