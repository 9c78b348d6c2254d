// `pickle bench ipc`'s table, printed from a report made here: every column stays apart whatever its values.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "../../tools/pickle/bench/ipc_report.hpp"
#include "bench_test_util.hpp"

namespace pickle::test {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::string line_starting_with(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (words(line).size() > 0 && words(line)[0] == start) return line;
  }
  return "";
}

// On two H200s (2026-11-30, call 3) a 1 GiB cudaIpc open took 9476.2 us [9129.1..10295.8]: 24 characters, the whole
// cell, so the row read "cudaMalloc      10737418249476.2 [...]".
TEST(BenchIpcTable, ASlowOpenOfALargeBufferKeepsItsColumnsApart) {
  bench::IpcReport report;
  bench::IpcRow row;
  row.method = "cudaMalloc";
  row.bytes = 1073741824;
  row.open_us = {9476.2, 9129.1, 10295.8};
  row.close_us = {71.37, 46.95, 139.4};
  row.reopen_us = {99999.9, 99999.8, 123456.7};  // wider than any cell
  row.wrong = 0;
  report.rows.push_back(row);
  const std::string table = printed_by([&](std::FILE* out) { bench::print_ipc_table(report, out); });
  const std::vector<std::string> cells = words(line_starting_with(table, "cudaMalloc"));
  ASSERT_EQ(cells.size(), 9u) << table;
  EXPECT_EQ(cells[1], "1073741824") << table;
  EXPECT_EQ(cells[2], "9476.2") << table;
  EXPECT_EQ(cells[3], "[9129.1..10295.8]") << table;
  EXPECT_EQ(cells[6], "99999.9") << table;
  EXPECT_EQ(cells[8], "0") << table;
  // Not run (a rank stopped before the cache measurement allocated): no "?" for the allocation's method.
  EXPECT_NE(table.find("into one allocation"), std::string::npos) << table;
  EXPECT_NE(table.find("# cache measurement failed: did not run"), std::string::npos) << table;
}

}  // namespace
}  // namespace pickle::test
