#pragma once
// What the `pickle bench` end-to-end tests share: running the real command and reading its table.

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

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

/// How many times `needle` occurs in `text` (not overlapping): a message said once must not be said twice.
inline std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
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

/// Rank 0's side of a two-rank run whose rank 1 was stopped mid-run (run_and_stop_rank1).
struct StoppedRun {
  ExitStatus status;
  std::string out, err;
  bool stopped = false;  ///< rank 1 was stopped when asked (false: rank 0 never printed the text in time)
  std::chrono::duration<double> rank0_after_stop{};  ///< from the stop to rank 0's exit
  std::string describe() const { return status.describe() + "\nstdout:\n" + out + "\nstderr:\n" + err; }
};

/// When run_and_stop_rank1 stops rank 1: `delay` after rank 0 has printed `text` on stderr (by default its first
/// progress line, 3 s in: some sizes are measured).
struct StopWhen {
  std::string text = "done (step ";
  std::chrono::milliseconds delay{0};
};

/// Starts `pickle bench <args>` as two ranks by hand (a launcher would stop them all at once), PICKLE_TIMEOUT=5,
/// stops rank 1 (SIGSTOP: alive, holding its connections, answering nothing) as `when` says, waits for rank 0, then
/// kills rank 1.
inline StoppedRun run_and_stop_rank1(const TempDir& dir, const std::vector<std::string>& args,
                                     const StopWhen& when = {}) {
  const int port = free_tcp_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> argv = {PICKLE_CLI_PATH, "bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string r = std::to_string(rank);
    pids.push_back(spawn_program(argv,
                                 {"RANK=" + r, "WORLD_SIZE=2", "LOCAL_RANK=" + r, "LOCAL_WORLD_SIZE=2",
                                  "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "PICKLE_TIMEOUT=5"},
                                 dir / ("out" + r), dir / ("err" + r)));
  }
  StoppedRun run;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(run.stopped = read_file(dir / "err0").find(when.text) != std::string::npos) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(when.delay);
  ::kill(pids[1], SIGSTOP);
  const auto stopped_at = std::chrono::steady_clock::now();
  run.status = wait_pid_or_kill(pids[0], std::chrono::seconds(90));
  run.rank0_after_stop = std::chrono::steady_clock::now() - stopped_at;
  ::kill(pids[1], SIGKILL);
  wait_pid_or_kill(pids[1], std::chrono::seconds(10));
  run.out = read_file(dir / "out0");
  run.err = read_file(dir / "err0");
  return run;
}

/// What every stop test checks of rank 0's end: exit 1 soon after the stop, and one error that says which phase the
/// ranks could not agree on and which rank never came, led by rank 0's own failure of that phase where it had one.
/// Until this was tested, memcpy and ipc exited 1 as soon, but said only "pickle bench: <the error>" and printed and
/// wrote nothing of what was measured (p2p and coll until 2026-11-29j: "store allgather ... never arrived" only).
inline void expect_the_stop_ended_the_run(const StoppedRun& run, const std::string& suite) {
  ASSERT_TRUE(run.stopped) << "rank 1 was not stopped in time:\n" << run.err;
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  // At most rank 0's own wait for the peer, then the exchange's: two PICKLE_TIMEOUTs (5 s), and room for a busy host.
  EXPECT_LT(run.rank0_after_stop.count(), 15.0) << run.describe();
  const std::string head = "pickle bench " + suite + ": ";
  EXPECT_NE(run.err.find(head), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("could not exchange how phase '"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("rank 1 of 2 never arrived"), std::string::npos) << run.err;
  const std::size_t own = run.err.find(head + "rank 0: ");
  if (own != std::string::npos) {
    EXPECT_NE(run.err.find("peer 1", own), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("; then the ranks could not exchange", own), std::string::npos) << run.err;
  }
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
