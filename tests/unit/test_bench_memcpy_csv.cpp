// `pickle bench memcpy --csv`: the seed's CSV shape. A column that never ran at some size (the run failed at a later
// size before that pass came) is written "nan", never as a 0 ms / 0 GB/s that reads like a measurement.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "../../tools/pickle/bench/memcpy_report.hpp"
#include "subprocess.hpp"

namespace pickle::bench {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(BenchMemcpyCsv, AColumnThatNeverRanIsNan) {
  MemcpyReport report;
  MemcpyRow& row = report.rows.emplace_back();
  row.bytes = 4096;
  row.async.samples_ms = {0.5};
  row.sync.samples_ms = {1.0, 3.0};
  // row.overhead never ran.
  test::TempDir dir("memcpy-csv");
  const std::string path = dir / "memcpy.csv";
  write_memcpy_csv(report, path);
  const std::string csv = read_all(path);
  const std::string first_row = csv.substr(csv.find('\n') + 1);
  EXPECT_EQ(first_row.rfind("4.00 KB, ", 0), 0u) << csv;
  EXPECT_NE(first_row.find(", nan, nan\n"), std::string::npos) << csv;
  EXPECT_EQ(first_row.find(", 0, 0"), std::string::npos) << csv;
  EXPECT_NE(first_row.find("2"), std::string::npos) << csv;  // sync's mean, 2 ms
}

}  // namespace
}  // namespace pickle::bench
