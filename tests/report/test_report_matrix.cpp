// `pickle report` for the matrix suite: a real `pickle bench matrix --memory host` run (three host-memory devices,
// NCCL unavailable) goes in; report.md must hold a Sender \ Receiver table per measured matrix with "—" on the
// diagonal and the bandwidths of the result file elsewhere, the pickle/ce ratio table, NCCL's reason, and a heatmap
// PNG per measured matrix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/json.hpp"
#include "report_test_util.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::string kMatrixHeader = "| Sender \\ Receiver | 0 | 1 | 2 |";

TEST(ReportMatrix, HostMemoryMatrixGivesTablesAndHeatmaps) {
  TempDir dir("report-matrix");
  const std::string result = dir / "matrix.json";
  Result bench = run_pickle(dir, {"bench", "matrix", "--memory", "host", "--gpus", "3", "--backend", "pickle,nccl,ce",
                                  "--mode", "uni", "-b", "64K", "-n", "2", "-w", "1", "--repeats", "1", "--json",
                                  result},
                            std::chrono::seconds(90));
  ASSERT_TRUE(bench.status.ok()) << bench.status.describe() << "\n" << bench.err;

  const std::string out = dir / "out";
  Result report = run_pickle(dir, {"report", result, "-o", out}, std::chrono::seconds(90));
  ASSERT_TRUE(report.status.ok()) << report.status.describe() << "\n" << report.err;
  EXPECT_EQ(report.err.find("not known"), std::string::npos) << report.err;
  const std::string md = read_file(out + "/report.md");

  // pickle, ce, then the pickle/ce ratio: three tables, a row per sender.
  auto found = tables(md, kMatrixHeader);
  ASSERT_EQ(found.size(), 3u) << md;
  json::Value root = json::parse(read_file(result));
  for (std::size_t t = 0; t < 3; ++t) {
    ASSERT_EQ(found[t].size(), 3u) << md;
    for (std::size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(found[t][i].size(), 4u) << md;
      EXPECT_EQ(found[t][i][0], std::to_string(i));
      for (std::size_t j = 0; j < 3; ++j) {
        if (i == j) {
          EXPECT_EQ(found[t][i][1 + j], "—") << md;
        } else {
          EXPECT_GT(std::stod(found[t][i][1 + j]), 0) << md;
        }
      }
    }
  }
  // The pickle table's numbers are the result file's, to the report's three significant digits.
  const json::Value& pickle = root.at("matrices").at(0);
  ASSERT_EQ(pickle.at("backend").as_string(), "pickle");
  double cell = pickle.at("gbps").at(0).at(1).as_double();
  EXPECT_NEAR(std::stod(found[0][0][2]), cell, 0.006 * cell + 0.0006) << md;
  EXPECT_NE(md.find("### uni, pickle/ce: ratio per cell"), std::string::npos) << md;
  EXPECT_NE(md.find("Unavailable: rank 0: nccl needs GPU memory"), std::string::npos) << md;
  EXPECT_EQ(check_plots(out, md), 2);  // a heatmap for pickle and one for ce
}

}  // namespace
}  // namespace pickle::test
