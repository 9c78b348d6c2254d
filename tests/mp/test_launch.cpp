// `pickle launch`: the real `pickle` binary starts real ranks (sh, or this test binary as a writer); the tests
// check the ranks' environment, the forwarded output byte for byte, and that a failing rank or a signal to the
// launcher ends the whole job promptly with no rank left behind.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "subprocess.hpp"

namespace pickle::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct LaunchResult {
  ExitStatus status;
  std::string out;
  std::string err;
  double seconds = 0;
};

std::vector<std::string> launch_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PICKLE_CLI_PATH, "launch"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Runs `pickle launch args...` to completion with output in files. PICKLE_TOKEN is cleared unless the test sets
// it, so that a token in the CI environment cannot change what the launcher does.
LaunchResult launch(const TempDir& dir, const std::vector<std::string>& args, std::vector<std::string> env = {},
                    std::chrono::milliseconds timeout = 20s) {
  env.insert(env.begin(), "PICKLE_TOKEN=");
  auto start = std::chrono::steady_clock::now();
  pid_t pid = spawn_program(launch_argv(args), env, dir / "launcher.out", dir / "launcher.err");
  LaunchResult result;
  result.status = wait_pid(pid, timeout);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result.status.timed_out) {
    ::kill(pid, SIGKILL);
    wait_pid(pid, 5s);
  }
  result.out = read_file(dir / "launcher.out");
  result.err = read_file(dir / "launcher.err");
  return result;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// A shell snippet that publishes the shell's pid as <dir>/pid.<rank> (atomically: written, then renamed).
const char* kWritePid = "echo $$ > \"$1/pid.$RANK.tmp\" && mv \"$1/pid.$RANK.tmp\" \"$1/pid.$RANK\"; ";
// A snippet that waits until ranks 0..$WORLD_SIZE-1 have all published their pids.
const char* kWaitAllPids =
    "i=0; while [ $i -lt $WORLD_SIZE ]; do while [ ! -e \"$1/pid.$i\" ]; do sleep 0.01; done; i=$((i+1)); done; ";

std::vector<pid_t> published_pids(const TempDir& dir, int world) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::string text = read_file(dir / ("pid." + std::to_string(r)));
    if (!text.empty()) pids.push_back(static_cast<pid_t>(std::stol(text)));
  }
  return pids;
}

void expect_all_dead(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) EXPECT_FALSE(process_alive(pid)) << "rank process " << pid << " outlived the launcher";
}

TEST(Launch, SetsTorchrunVariablesPerRank) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n", "3", "--", "sh", "-c",
                             "echo R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE A=$MASTER_ADDR "
                             "P=$MASTER_PORT T=${PICKLE_TOKEN:+set}"});
  ASSERT_TRUE(result.status.ok()) << result.status.describe() << "\n" << result.err;
  auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), 3u) << result.out;
  std::regex pattern(R"(\[(\d)\] R=(\d) W=3 L=(\d) LW=3 A=127\.0\.0\.1 P=(\d+) T=set)");
  std::set<int> ranks;
  std::set<std::string> ports;
  for (const auto& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, pattern)) << line;
    EXPECT_EQ(m[1], m[2]) << line;  // the prefix names the rank that wrote the line
    EXPECT_EQ(m[2], m[3]) << line;  // LOCAL_RANK == RANK on one host
    ranks.insert(std::stoi(m[2]));
    ports.insert(m[4]);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
  ASSERT_EQ(ports.size(), 1u) << "ranks disagree on MASTER_PORT:\n" << result.out;
  int port = std::stoi(*ports.begin());
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_EQ(result.err, "");
}

TEST(Launch, TokenIsFreshPerJobSharedByRanksAndUserTokenWins) {
  TempDir dir("launch");
  std::vector<std::string> args = {"-n", "2", "--", "sh", "-c", "echo T=$PICKLE_TOKEN"};
  auto tokens_of = [&](const LaunchResult& result) {
    std::set<std::string> tokens;
    for (const auto& line : lines_of(result.out)) tokens.insert(line.substr(line.find("T=") + 2));
    return tokens;
  };
  auto first = launch(dir, args);
  auto second = launch(dir, args);
  ASSERT_TRUE(first.status.ok() && second.status.ok()) << first.err << second.err;
  auto a = tokens_of(first), b = tokens_of(second);
  ASSERT_EQ(a.size(), 1u) << first.out;
  ASSERT_EQ(b.size(), 1u) << second.out;
  EXPECT_TRUE(std::regex_match(*a.begin(), std::regex("[0-9a-f]{32}"))) << *a.begin();
  EXPECT_NE(*a.begin(), *b.begin()) << "two jobs got the same token";

  auto mine = launch(dir, args, {"PICKLE_TOKEN=my-secret"});
  ASSERT_TRUE(mine.status.ok()) << mine.err;
  EXPECT_EQ(tokens_of(mine), std::set<std::string>{"my-secret"});
  auto via_env = launch(dir, {"-n", "1", "--env", "PICKLE_TOKEN=from-flag", "--", "sh", "-c", "echo T=$PICKLE_TOKEN"});
  EXPECT_EQ(via_env.out, "[0] T=from-flag\n");
}

TEST(Launch, MasterOptionsAndExtraEnv) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n2", "--master-port=29555", "--master-addr", "127.0.0.2", "--env", "FOO=bar=baz",
                             "--env", "EMPTY=", "sh", "-c",
                             "echo $RANK $MASTER_ADDR $MASTER_PORT $FOO ${EMPTY-unset}${EMPTY+set}"});
  ASSERT_TRUE(result.status.ok()) << result.status.describe() << "\n" << result.err;
  auto lines = lines_of(result.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[0] 0 127.0.0.2 29555 bar=baz set", "[1] 1 127.0.0.2 29555 bar=baz set"}));
}

TEST(Launch, RankExitCodeStopsTheOthers) {
  TempDir dir("launch");
  std::string script = std::string(kWritePid) + kWaitAllPids +
                       "if [ $RANK = 1 ]; then echo last words; exit 3; fi; exec sleep 60";
  auto result = launch(dir, {"-n", "4", "--", "sh", "-c", script, "sh", dir.str()});
  EXPECT_TRUE(result.status.exited) << result.status.describe();
  EXPECT_EQ(result.status.code, 3) << result.err;
  EXPECT_LT(result.seconds, 5.0);
  EXPECT_TRUE(contains(result.err, "pickle launch: rank 1 (pid ")) << result.err;
  EXPECT_TRUE(contains(result.err, ") exited with code 3; stopping the other 3 ranks")) << result.err;
  EXPECT_EQ(result.out, "[1] last words\n");  // output written just before dying is not lost
  auto pids = published_pids(dir, 4);
  ASSERT_EQ(pids.size(), 4u);
  expect_all_dead(pids);
}

TEST(Launch, RankKilledBySignalStopsTheOthers) {
  TempDir dir("launch");
  std::string script = std::string(kWritePid) + kWaitAllPids + "if [ $RANK = 2 ]; then kill -9 $$; fi; exec sleep 60";
  auto result = launch(dir, {"-n", "3", "sh", "-c", script, "sh", dir.str()});
  EXPECT_TRUE(result.status.exited) << result.status.describe();
  EXPECT_EQ(result.status.code, 128 + 9);
  EXPECT_LT(result.seconds, 5.0);
  EXPECT_TRUE(contains(result.err, "pickle launch: rank 2 (pid ")) << result.err;
  EXPECT_TRUE(contains(result.err, ") was killed by signal 9 (Killed); stopping the other 2 ranks")) << result.err;
  auto pids = published_pids(dir, 3);
  ASSERT_EQ(pids.size(), 3u);
  expect_all_dead(pids);
}

TEST(Launch, RankIgnoringSigtermIsKilledAfterGracePeriod) {
  TempDir dir("launch");
  // Rank 0 ignores SIGTERM (the ignored disposition survives exec); only SIGKILL after the grace period ends it.
  // The trap is set before the pid is published, so it is in place before rank 1 fails.
  std::string script = std::string("if [ $RANK = 0 ]; then trap '' TERM; fi; ") + kWritePid + kWaitAllPids +
                       "if [ $RANK = 1 ]; then exit 5; fi; exec sleep 60";
  auto result = launch(dir, {"-n", "2", "--", "sh", "-c", script, "sh", dir.str()});
  EXPECT_EQ(result.status.code, 5) << result.status.describe() << "\n" << result.err;
  EXPECT_GT(result.seconds, 1.5);  // it did wait for the grace period
  EXPECT_LT(result.seconds, 5.0);
  EXPECT_TRUE(contains(result.err, "1 rank still running")) << result.err;
  EXPECT_TRUE(contains(result.err, "sending SIGKILL")) << result.err;
  expect_all_dead(published_pids(dir, 2));
}

// Waits (up to 10 s) until ranks 0..world-1 have published their pids (kWritePid); returns those that did.
std::vector<pid_t> wait_for_pids(const TempDir& dir, int world) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (published_pids(dir, world).size() < static_cast<std::size_t>(world) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  return published_pids(dir, world);
}

struct Stopped {
  ExitStatus status;
  double seconds = 0;  // from the signal to the launcher's exit
};

// Sends `sig` to the launcher and waits up to 10 s for it to exit (then kills it, so that no test leaves it behind).
Stopped signal_and_wait(pid_t launcher, int sig) {
  auto start = std::chrono::steady_clock::now();
  ::kill(launcher, sig);
  Stopped stopped;
  stopped.status = wait_pid(launcher, 10s);
  stopped.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stopped.status.timed_out) {
    ::kill(launcher, SIGKILL);
    wait_pid(launcher, 5s);
  }
  return stopped;
}

// `env` lets a test preload a library into the launcher.
void signal_the_launcher(int sig, const std::vector<std::string>& env = {}) {
  TempDir dir("launch");
  std::string script = std::string(kWritePid) + "exec sleep 60";
  pid_t launcher = spawn_program(launch_argv({"-n", "3", "--", "sh", "-c", script, "sh", dir.str()}), env,
                                 dir / "launcher.out", dir / "launcher.err");
  auto pids = wait_for_pids(dir, 3);
  ASSERT_EQ(pids.size(), 3u) << "ranks did not start";
  auto [status, seconds] = signal_and_wait(launcher, sig);
  std::string err = read_file(dir / "launcher.err");
  EXPECT_TRUE(status.exited) << status.describe();
  EXPECT_EQ(status.code, 128 + sig) << err;
  EXPECT_LT(seconds, 3.0);  // the sleepers die on the forwarded signal at once, no grace period needed
  EXPECT_TRUE(contains(err, "received signal " + std::to_string(sig))) << err;
  EXPECT_TRUE(contains(err, "forwarding it to 3 ranks")) << err;
  expect_all_dead(pids);
}

TEST(Launch, SigtermToLauncherEndsTheRanks) { signal_the_launcher(SIGTERM); }
TEST(Launch, SigintToLauncherEndsTheRanks) { signal_the_launcher(SIGINT); }

// The kernel gives a process-directed signal to any thread that does not block it: here only the preloaded library's
// thread. The signal must still reach the launcher's loop (and be forwarded), not end the launcher outright.
TEST(Launch, SigtermIsForwardedWhenALibraryThreadTakesIt) {
  signal_the_launcher(SIGTERM, {std::string("LD_PRELOAD=") + PICKLE_TEST_PRELOAD});
}

// With stdout and stderr one file (`2>&1`), a rank's last lines come before the launcher's news of its exit: the
// two streams once had a writer thread each, and the news could overtake the lines (2 runs in 30).
TEST(Launch, WithStderrIntoStdoutTheRanksLastLinesComeBeforeItsExit) {
  TempDir dir("launch");
  const std::string out = dir / "both.txt";
  for (int run = 0; run < 10; ++run) {
    pid_t launcher = spawn_program({"/bin/sh", "-c", "exec \"$0\" launch -n 1 -- sh -c 'seq 1 20000; exit 3' >\"$1\" 2>&1",
                                    PICKLE_CLI_PATH, out});
    auto status = wait_pid(launcher, 20s);
    ASSERT_EQ(status.code, 3) << status.describe();
    const std::string text = read_file(out);
    const auto last = text.find("[0] 20000\n"), news = text.find("pickle launch: rank 0");
    ASSERT_NE(last, std::string::npos) << "run " << run;
    ASSERT_NE(news, std::string::npos) << "run " << run;
    EXPECT_LT(last, news) << "run " << run << ": the exit was reported before the rank's last line";
  }
}

// Started with SIGHUP ignored (nohup), the launcher leaves it ignored: it neither forwards it nor stops the job.
TEST(Launch, ASignalIgnoredAtStartStaysIgnored) {
  TempDir dir("launch");
  std::string rank_script = std::string(kWritePid) + "sleep 1";
  pid_t launcher = spawn_program({"/bin/sh", "-c", "trap '' HUP; exec \"$0\" launch -n 1 -- sh -c \"$1\" sh \"$2\"",
                                  PICKLE_CLI_PATH, rank_script, dir.str()},
                                 {}, dir / "launcher.out", dir / "launcher.err");
  ASSERT_EQ(wait_for_pids(dir, 1).size(), 1u) << "the rank did not start";
  ::kill(launcher, SIGHUP);
  auto status = wait_pid(launcher, 20s);
  const std::string err = read_file(dir / "launcher.err");
  EXPECT_TRUE(status.ok()) << status.describe() << "\n" << err;
  EXPECT_FALSE(contains(err, "received signal")) << err;
}

// stdout is a FIFO that nobody reads (a pager the user stopped). The ranks fill it and the launcher's queue; a
// SIGTERM must still be forwarded at once and the launcher must end, not wait for a reader that never comes.
TEST(Launch, AStdoutNobodyReadsDoesNotKeepSignalsOut) {
  TempDir dir("launch");
  const std::string fifo = dir / "stdout.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // held open, never read
  ASSERT_GE(reader, 0) << std::strerror(errno);
  // Each rank writes far more than the FIFO and the launcher's queue hold (~8 MiB of short lines).
  std::string script = std::string(kWritePid) + "yes pickle | head -c 8000000; exec sleep 60";
  pid_t launcher = spawn_program(launch_argv({"-n", "2", "--", "sh", "-c", script, "sh", dir.str()}), {}, fifo,
                                 dir / "launcher.err");
  auto pids = wait_for_pids(dir, 2);
  ASSERT_EQ(pids.size(), 2u) << "ranks did not start";
  std::this_thread::sleep_for(500ms);  // let the output back up
  auto [status, seconds] = signal_and_wait(launcher, SIGTERM);
  ::close(reader);
  std::string err = read_file(dir / "launcher.err");
  EXPECT_TRUE(status.exited) << status.describe() << "\n" << err;
  EXPECT_EQ(status.code, 128 + SIGTERM) << err;
  EXPECT_LT(seconds, 5.0);
  EXPECT_TRUE(contains(err, "forwarding it to 2 ranks")) << err;
  expect_all_dead(pids);
}

// A rank that writes `count` numbered lines of varying length to stdout and to stderr, in write() calls whose
// sizes do not follow line boundaries, so that the launcher sees lines split across reads. The last line of each
// stream has no newline.
std::string writer_line(const char* stream, int rank, int i) {
  std::string line = std::string(stream) + " " + std::to_string(rank) + " " + std::to_string(i) + " ";
  line.append(static_cast<std::size_t>((i * 37 + rank * 11) % 300), static_cast<char>('a' + (i + rank) % 26));
  return line;
}

PICKLE_CHILD(launch_writer) {
  int count = std::stoi(args.at(0));
  int rank = std::stoi(std::getenv("RANK"));
  std::string out, err;
  for (int i = 0; i < count; ++i) {
    out += writer_line("out", rank, i) + "\n";
    err += writer_line("err", rank, i) + "\n";
  }
  out += "tail " + std::to_string(rank);
  err += "tail " + std::to_string(rank);
  std::size_t o = 0, e = 0, step = 0;
  while (o < out.size() || e < err.size()) {
    std::size_t chunk = 1 + (step * 7919 + static_cast<std::size_t>(rank) * 104729) % 3000;
    ++step;
    std::string& text = (step % 2 == 0) ? out : err;
    std::size_t& pos = (step % 2 == 0) ? o : e;
    int fd = (step % 2 == 0) ? 1 : 2;
    std::size_t n = std::min(chunk, text.size() - pos);
    while (n > 0) {
      ssize_t w = ::write(fd, text.data() + pos, n);
      if (w < 0) return 1;
      pos += static_cast<std::size_t>(w);
      n -= static_cast<std::size_t>(w);
    }
  }
  return 0;
}


// Checks that `text` is exactly the interleaving of whole lines of 2 writers, each writer's lines in order.
void expect_whole_lines(const std::string& text, const char* stream, bool prefixed, int count) {
  std::map<int, int> next;  // rank -> index of the next expected line
  std::map<int, bool> tail_seen;
  for (const auto& line : lines_of(text)) {
    std::string body = line;
    int prefix_rank = -1;
    if (prefixed) {
      ASSERT_TRUE(line.size() > 4 && line[0] == '[' && line[2] == ']' && line[3] == ' ') << "bad prefix: " << line;
      prefix_rank = line[1] - '0';
      body = line.substr(4);
    }
    std::smatch m;
    if (std::regex_match(body, m, std::regex("tail (\\d)"))) {
      int rank = std::stoi(m[1]);
      if (prefixed) {
        EXPECT_EQ(rank, prefix_rank);
      }
      EXPECT_EQ(next[rank], count) << "tail of rank " << rank << " before its last line";
      tail_seen[rank] = true;
      continue;
    }
    ASSERT_TRUE(std::regex_search(body, m, std::regex("^\\w+ (\\d) (\\d+) "))) << "torn line: " << line.substr(0, 80);
    int rank = std::stoi(m[1]);
    if (prefixed) {
      ASSERT_EQ(rank, prefix_rank) << line.substr(0, 80);
    }
    ASSERT_EQ(body, writer_line(stream, rank, next[rank])) << "line " << next[rank] << " of rank " << rank;
    ++next[rank];
  }
  EXPECT_EQ(next[0], count);
  EXPECT_EQ(next[1], count);
  EXPECT_TRUE(tail_seen[0] && tail_seen[1]);
}

TEST(Launch, PrefixedOutputKeepsLinesWhole) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n", "2", "--", self_exe(), "--pickle-child", "launch_writer", "2000"});
  ASSERT_TRUE(result.status.ok()) << result.status.describe() << "\n" << result.err.substr(0, 2000);
  expect_whole_lines(result.out, "out", true, 2000);
  expect_whole_lines(result.err, "err", true, 2000);
}

TEST(Launch, NoPrefixForwardsLinesUnchanged) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n", "2", "--no-prefix", "--", self_exe(), "--pickle-child", "launch_writer", "2000"});
  ASSERT_TRUE(result.status.ok()) << result.status.describe() << "\n" << result.err.substr(0, 2000);
  expect_whole_lines(result.out, "out", false, 2000);
  expect_whole_lines(result.err, "err", false, 2000);
}

TEST(Launch, CarriageReturnsAndCrlfKeepTheirTerminators) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n", "1", "--", "printf", "10%%\\r20%%\\rdone\\r\\nnext\\n"});
  ASSERT_TRUE(result.status.ok()) << result.err;
  EXPECT_EQ(result.out, "[0] 10%\r[0] 20%\r[0] done\r\n[0] next\n");
}

TEST(Launch, BadUsageExitsWithCode2) {
  TempDir dir("launch");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"-n", "0", "--", "true"}, "-n/--nproc needs a number of ranks of at least 1, got '0'"},
      {{"-n", "x", "true"}, "-n/--nproc needs a number of ranks of at least 1, got 'x'"},
      {{"-n", "2"}, "no command given"},
      {{"-n", "2", "--"}, "no command given"},
      {{"true"}, "-n/--nproc is required"},
      {{"-n", "2", "--frobnicate", "true"}, "unknown option '--frobnicate'"},
      {{"-n", "2", "--master-port", "70000", "true"}, "--master-port needs a TCP port"},
      {{"-n", "2", "--env", "NOEQUALS", "true"}, "--env needs NAME=VALUE"},
      {{"-n", "2", "--env", "RANK=5", "true"}, "--env cannot set RANK"},
      {{"-n"}, "-n needs a value"},
  };
  for (const auto& c : cases) {
    auto result = launch(dir, c.args);
    EXPECT_TRUE(result.status.exited) << result.status.describe();
    EXPECT_EQ(result.status.code, 2) << "args: " << ::testing::PrintToString(c.args) << "\n" << result.err;
    EXPECT_TRUE(contains(result.err, "pickle launch: " + c.message)) << result.err;
    EXPECT_EQ(result.out, "");
  }
}

TEST(Launch, MissingProgramIsAClearError) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n", "2", "--", "pickle-no-such-program-xyz"});
  EXPECT_EQ(result.status.code, 1) << result.status.describe();
  EXPECT_TRUE(contains(result.err, "'pickle-no-such-program-xyz' was not found in PATH")) << result.err;
  auto not_executable = launch(dir, {"-n", "2", "--", "/dev/null"});
  EXPECT_EQ(not_executable.status.code, 1) << not_executable.status.describe();
  EXPECT_TRUE(contains(not_executable.err, "rank 0: cannot execute /dev/null")) << not_executable.err;
  EXPECT_FALSE(contains(result.err + not_executable.err, "launch: launch:")) << result.err << not_executable.err;
}

// More ranks than the open-file limit allows pipes for: refused before any rank starts (-n 100000 had started about
// ten thousand ranks when a pipe failed).
TEST(Launch, MoreRanksThanOpenFilesAllowIsRefusedBeforeAnyStarts) {
  TempDir dir("launch");
  const std::string marker = dir / "started";
  const std::string command = std::string("ulimit -n 64 && exec '") + PICKLE_CLI_PATH +
                              "' launch -n 100 -- /bin/sh -c 'touch " + marker + "'";
  pid_t pid = spawn_program({"/bin/bash", "-c", command}, {"PICKLE_TOKEN="}, dir / "out", dir / "err");
  const ExitStatus status = wait_pid_or_kill(pid, 30s);
  const std::string err = read_file(dir / "err");
  EXPECT_TRUE(status.exited && status.code == 1) << status.describe() << "\n" << err;
  EXPECT_TRUE(contains(err, "pickle launch: -n 100 needs about 264 open files")) << err;
  EXPECT_TRUE(contains(err, "(ulimit -n)")) << err;
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "a rank started";
}

// A PICKLE_LOG value that is not a level is said once, and the command runs (the first log line used to throw from
// inside logging and abort the process).
TEST(Launch, ABadLogLevelIsSaidNotFatal) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n", "1", "--", "sh", "-c", "echo ran"}, {"PICKLE_LOG=verbose"});
  EXPECT_TRUE(result.status.ok()) << result.status.describe() << "\n" << result.err;
  EXPECT_TRUE(contains(result.out, "[0] ran")) << result.out;
  EXPECT_TRUE(contains(result.err, "pickle: PICKLE_LOG='verbose': use error, warn, info or debug; logging at warn"))
      << result.err;
  EXPECT_FALSE(contains(result.err, "InvalidArgument")) << result.err;  // the user's words, not the exception's
}

TEST(Launch, HelpDescribesTheOptions) {
  TempDir dir("launch");
  auto result = launch(dir, {"--help"});
  EXPECT_TRUE(result.status.ok());
  EXPECT_TRUE(contains(result.out, "usage: pickle launch -n N")) << result.out;
  EXPECT_TRUE(contains(result.out, "--no-prefix")) << result.out;
}

TEST(Launch, AllRanksSucceedingExitsZeroAfterTheSlowest) {
  TempDir dir("launch");
  auto result = launch(dir, {"-n", "3", "--", "sh", "-c", "sleep 0.$RANK; echo done"});
  EXPECT_TRUE(result.status.ok()) << result.status.describe() << result.err;
  EXPECT_GE(result.seconds, 0.2);
  auto lines = lines_of(result.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[0] done", "[1] done", "[2] done"}));
}

}  // namespace
}  // namespace pickle::test
