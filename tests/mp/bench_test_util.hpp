#pragma once
// What the `pickle bench` end-to-end tests share: running the real command and reading its table.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.hpp"

namespace pickle::test {

/// How a `pickle bench` run ended, and what it printed.
struct BenchRun {
  ExitStatus status;
  std::string out, err;
  std::string describe() const { return status.describe() + "\nstdout:\n" + out + "\nstderr:\n" + err; }
};

/// What `print(FILE*)` writes (a table printer of a bench suite), as a string.
template <class Print>
std::string printed_by(Print print) {
  char* text = nullptr;
  std::size_t length = 0;
  std::FILE* out = open_memstream(&text, &length);
  print(out);
  std::fclose(out);
  std::string result(text, length);
  std::free(text);
  return result;
}

/// Runs `pickle bench <suite> args...` (no suite word when `suite` is empty) with PICKLE_TIMEOUT=20 and `env` (which
/// may set another PICKLE_TIMEOUT), its output captured in `dir`, waiting at most `limit` for it (wait_pid).
inline BenchRun run_bench(const TempDir& dir, const std::string& suite, const std::vector<std::string>& args,
                          const std::vector<std::string>& env = {},
                          std::chrono::seconds limit = std::chrono::seconds(90)) {
  std::vector<std::string> argv = {PICKLE_CLI_PATH, "bench"};
  if (!suite.empty()) argv.push_back(suite);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> environment = {"PICKLE_TIMEOUT=20"};
  environment.insert(environment.end(), env.begin(), env.end());
  pid_t pid = spawn_program(argv, environment, dir / "out", dir / "err");
  BenchRun run;
  run.status = wait_pid_or_kill(pid, limit);
  run.out = read_file(dir / "out");
  run.err = read_file(dir / "err");
  return run;
}

/// The table's data rows (lines that do not start with '#'), split into cells.
inline std::vector<std::vector<std::string>> table_rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string cell; cells >> cell;) row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace pickle::test
