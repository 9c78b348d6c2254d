// docs/env.md must list exactly the variables of the env table, with the same defaults.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "core/env.hpp"
#include "subprocess.hpp"

namespace pickle {
namespace {

std::string trim(std::string text) {
  auto first = text.find_first_not_of(" `");
  auto last = text.find_last_not_of(" `");
  return first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
}

TEST(EnvDoc, TableAndDocsAgree) {
  std::string doc = test::read_file(PICKLE_SOURCE_DIR "/docs/env.md");
  ASSERT_FALSE(doc.empty()) << "docs/env.md is missing";
  std::map<std::string, std::string> documented;  // name -> default
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `PICKLE_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(trim(cell));
    ASSERT_GE(cells.size(), 3u) << line;
    documented[cells[0]] = cells[1] == "(unset)" ? "" : cells[1];
  }
  for (const auto& var : env::table()) {
    auto it = documented.find(std::string(var.name));
    ASSERT_NE(it, documented.end()) << var.name << " is in the env table but not in docs/env.md";
    EXPECT_EQ(it->second, var.default_value) << "default of " << var.name << " differs in docs/env.md";
    documented.erase(it);
  }
  for (const auto& [name, value] : documented) ADD_FAILURE() << name << " is in docs/env.md but not in the table";
}

}  // namespace
}  // namespace pickle
