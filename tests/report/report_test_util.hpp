#pragma once
// What the `pickle report` end-to-end tests share: running the pickle command, reading report.md's tables and checking
// the plots it links.

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.hpp"

namespace pickle::test {

/// How a `pickle ...` run ended, and what it printed.
struct Result {
  ExitStatus status;
  std::string out, err;
};

/// Runs `pickle ARGS` with PICKLE_TIMEOUT=20 and `env`, its stdout/stderr in files of `dir`.
inline Result run_pickle(const TempDir& dir, const std::vector<std::string>& args, std::chrono::seconds timeout,
                         const std::vector<std::string>& env = {}) {
  static int counter = 0;
  std::string tag = std::to_string(counter++);
  std::vector<std::string> argv = {PICKLE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> environment = {"PICKLE_TIMEOUT=20"};
  environment.insert(environment.end(), env.begin(), env.end());
  pid_t pid = spawn_program(argv, environment, dir / ("out" + tag), dir / ("err" + tag));
  Result result;
  result.status = wait_pid_or_kill(pid, timeout);
  result.out = read_file(dir / ("out" + tag));
  result.err = read_file(dir / ("err" + tag));
  return result;
}

/// The cells of one Markdown table row, trimmed.
inline std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 1;
  while (start < line.size()) {
    std::size_t end = line.find(" |", start);
    if (end == std::string::npos) break;
    std::string cell = line.substr(start, end - start);
    out.push_back(cell.substr(cell.find_first_not_of(' ')));
    start = end + 2;
  }
  return out;
}

/// The data rows of every table of `markdown` whose header line is `header`, one vector per table.
inline std::vector<std::vector<std::vector<std::string>>> tables(const std::string& markdown,
                                                                 const std::string& header) {
  std::vector<std::vector<std::vector<std::string>>> found;
  std::istringstream in(markdown);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line == header) {
      found.emplace_back();
      inside = true;
    } else if (inside && line.starts_with("|---")) {
      continue;
    } else if (inside && line.starts_with("| ")) {
      found.back().push_back(cells(line));
    } else {
      inside = false;
    }
  }
  return found;
}

/// Checks that every image report.md links is a real PNG in `out`; returns how many it links.
inline int check_plots(const std::string& out, const std::string& md) {
  const std::regex link(R"(!\[[^\]]*\]\(([^)]+)\))");
  int links = 0;
  for (auto it = std::sregex_iterator(md.begin(), md.end(), link); it != std::sregex_iterator(); ++it) {
    std::string png = read_file(out + "/" + (*it)[1].str());
    ++links;
    EXPECT_GT(png.size(), 10'000u) << (*it)[1];
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << (*it)[1];
  }
  return links;
}

}  // namespace pickle::test
