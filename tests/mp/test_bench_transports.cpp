// `pickle bench transports` end to end on host memory: the real command starts a process set per configuration and
// run (`pickle bench p2p` children), reads their result files back, prints seed 000's table and writes its own
// result file. NCCL cannot run on host memory: its rows are skipped with the reason, and the pickle rows run (host
// memory has ipc and shm transports too), so the whole orchestration runs here. Also: a child with wrong bytes
// fails the suite with the child's error shown, and bad flags exit 2 before any child starts.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <string_view>
#include <thread>

#include "bench_test_util.hpp"
#include "core/json.hpp"
#include "device/backends.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::vector<std::string> kConfigNames = {"NCCL (default: P2P/NVLink)", "NCCL (NCCL_P2P_DISABLE=1: SHM)",
                                               "pickle ipc", "pickle shm"};
const std::vector<std::string> kConfigKeys = {"nccl-p2p", "nccl-shm", "pickle-ipc", "pickle-shm"};
const std::vector<std::int64_t> kSizes = {4096, 8192, 16384, 32768, 65536};

/// The lines of one operation's section of the output ("# pickle bench transports: <op> ..." up to the next).
std::vector<std::string> section_lines(const std::string& out, const std::string& op) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    const std::string head = "# pickle bench transports: ";
    if (line.starts_with(head)) inside = line.starts_with(head + op + " ");
    if (inside) lines.push_back(line);
  }
  return lines;
}

/// The seed table's row of a configuration: the words after its name.
std::vector<std::string> row_of(const std::vector<std::string>& lines, const std::string& name) {
  for (const auto& line : lines) {
    if (!line.starts_with("  " + name + " ")) continue;
    std::istringstream cells(line.substr(2 + name.size()));
    std::vector<std::string> words;
    for (std::string w; cells >> w;) words.push_back(w);
    return words;
  }
  return {};
}

/// Half a unit of the last digit a number was printed with ("17.93" -> 0.005): its rounding error at most.
double half_last_digit(const std::string& printed) {
  const auto point = printed.find('.');
  const int decimals = point == std::string::npos ? 0 : static_cast<int>(printed.size() - point - 1);
  return 0.5 * std::pow(10.0, -decimals);
}

// The key by value: a reference parameter bound to a temporary ("x" + lanes) makes GCC 13+ warn that the returned
// reference may dangle (-Wdangling-reference), although it points into `operation`.
const json::Value& config_of(const json::Value& operation, std::string_view key) {
  for (const auto& c : operation.at("configurations").as_array()) {
    if (c.at("key").as_string() == key) return c;
  }
  throw std::runtime_error("no configuration " + std::string(key));
}

TEST(BenchTransports, HostMemoryRunsThePickleRowsAndSkipsNccl) {
  TempDir dir("bench-transports");
  const std::string json_path = dir / "result.json";
  // A PICKLE_TRANSPORT of the caller must not leak into the configurations: each sets its own.
  BenchRun run = run_bench(dir, "transports", {"--runs", "2", "-b", "4K", "-e", "64K", "-n", "2", "-w", "1",
                                               "--repeats", "2", "--json", json_path},
                           {"PICKLE_TRANSPORT=shm", "NCCL_P2P_DISABLE=1"});
  ASSERT_TRUE(run.status.ok()) << run.describe();

  std::vector<std::string> p2p = section_lines(run.out, "p2p");
  ASSERT_FALSE(p2p.empty()) << run.out;
  // The seed's table: the four configurations; NCCL skipped with the reason, pickle's two runs, mean and gain.
  bool header = false;
  for (const auto& line : p2p) {
    header |= line.starts_with("# configuration") && line.find("run 1") != std::string::npos &&
              line.find("run 2") != std::string::npos && line.find("mean GB/s (64K)") != std::string::npos;
  }
  EXPECT_TRUE(header) << run.out;
  for (std::size_t i = 0; i < 2; ++i) {
    auto row = row_of(p2p, kConfigNames[i]);
    ASSERT_GE(row.size(), 2u) << kConfigNames[i] << "\n" << run.out;
    EXPECT_EQ(row[0], "skipped:") << run.out;
    std::string reason;
    for (std::size_t w = 1; w < row.size(); ++w) reason += row[w] + " ";
    EXPECT_NE(reason.find("nccl needs GPU memory"), std::string::npos) << run.out;
  }
  for (std::size_t i = 2; i < 4; ++i) {
    auto row = row_of(p2p, kConfigNames[i]);
    ASSERT_GE(row.size(), 4u) << kConfigNames[i] << "\n" << run.out;
    double run1 = std::stod(row[0]), run2 = std::stod(row[1]), mean = std::stod(row[2]);
    EXPECT_GT(run1, 0);
    EXPECT_GT(run2, 0);
    EXPECT_NEAR(mean, (run1 + run2) / 2, 0.002 + 0.01 * mean) << run.out;
  }
  // pickle ipc's row carries its gain over pickle shm; pickle shm's has none (NCCL SHM did not run).
  auto ipc = row_of(p2p, "pickle ipc");
  ASSERT_GE(ipc.size(), 6u) << run.out;
  EXPECT_TRUE(ipc[3].ends_with("x")) << run.out;
  EXPECT_EQ(ipc[5], "over") << run.out;
  auto shm = row_of(p2p, "pickle shm");
  ASSERT_GE(shm.size(), 4u) << run.out;
  EXPECT_EQ(shm[3], "-") << run.out;  // its gain is over NCCL SHM, which did not run
  // The per-size table: a row per size, NCCL n/a, pickle's means, the ipc/shm ratio.
  std::vector<std::int64_t> sizes;
  for (const auto& line : p2p) {
    if (line.starts_with("#")) continue;
    std::istringstream cells(line);
    std::vector<std::string> words;
    for (std::string w; cells >> w;) words.push_back(w);
    if (words.size() != 8 || words[0].find_first_not_of("0123456789") != std::string::npos) continue;
    sizes.push_back(std::stoll(words[0]));
    EXPECT_EQ(words[1], "n/a") << line;
    EXPECT_EQ(words[2], "n/a") << line;
    EXPECT_GT(std::stod(words[3]), 0) << line;
    EXPECT_GT(std::stod(words[4]), 0) << line;
    // The table rounds each mean to its last printed digit (gbps_text: 2 decimals from 10 GB/s, 3 below, more
    // below 0.1) and the ratio to 0.001: allow exactly that.
    double ipc_mean = std::stod(words[3]), shm_mean = std::stod(words[4]), ratio = ipc_mean / shm_mean;
    double slack = ratio * (half_last_digit(words[3]) / ipc_mean + half_last_digit(words[4]) / shm_mean) * 1.01 + 0.0005;
    EXPECT_NEAR(std::stod(words[6]), ratio, slack) << line;
  }
  EXPECT_EQ(sizes, kSizes) << run.out;

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("schema").as_string(), "pickle-bench/1");
  EXPECT_EQ(root.at("suite").as_string(), "transports");
  EXPECT_EQ(root.at("command").at(2).as_string(), "transports");
  EXPECT_EQ(root.at("options").at("runs").as_int(), 2);
  EXPECT_EQ(root.at("options").at("memory").as_string(), "host");
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  EXPECT_TRUE(root.at("topology").contains("host"));
  EXPECT_TRUE(root.at("environment").contains("PICKLE_TIMEOUT"));

  const auto& operations = root.at("operations").as_array();
  ASSERT_EQ(operations.size(), 2u);  // the default --ops: p2p, allreduce
  EXPECT_EQ(operations[0].at("op").as_string(), "p2p");
  EXPECT_EQ(operations[1].at("op").as_string(), "allreduce");
  for (const auto& operation : operations) {
    std::string op = operation.at("op").as_string();
    if (operation.at("status").as_string() == "skipped") {
      // Only allreduce may be skipped, and only in a build without `pickle bench coll`.
      EXPECT_EQ(op, "allreduce");
      EXPECT_NE(operation.at("detail").as_string().find("pickle bench coll"), std::string::npos);
      EXPECT_NE(run.out.find("# allreduce skipped: "), std::string::npos) << run.out;
      continue;
    }
    ASSERT_EQ(operation.at("configurations").size(), 4u) << op;
    EXPECT_EQ(operation.at("largest_bytes").as_int(), 65536) << op;
    for (std::size_t i = 0; i < 4; ++i) {
      const json::Value& c = config_of(operation, kConfigKeys[i]);
      std::string what = op + " " + kConfigKeys[i];
      EXPECT_EQ(c.at("name").as_string(), kConfigNames[i]) << what;
      EXPECT_EQ(c.at("env").at("NCCL_NVLS_ENABLE").as_string(), "0") << what;
      if (i < 2) {
        // Unavailable in the first run, so not started again.
        EXPECT_EQ(c.at("status").as_string(), "skipped") << what;
        EXPECT_NE(c.at("detail").as_string().find("GPU memory"), std::string::npos) << what;
        ASSERT_EQ(c.at("runs").size(), 1u) << what;
        EXPECT_EQ(c.at("runs").at(0).at("status").as_string(), "unavailable") << what;
        EXPECT_EQ(c.at("mean_gbps").size(), 0u) << what;
        continue;
      }
      EXPECT_EQ(c.at("status").as_string(), "ok") << what << ": " << c.at("detail").as_string();
      EXPECT_EQ(c.at("env").at("PICKLE_TRANSPORT").as_string(), i == 2 ? "ipc" : "shm") << what;
      ASSERT_EQ(c.at("runs").size(), 2u) << what;
      std::vector<double> at_largest;
      for (const auto& r : c.at("runs").as_array()) {
        EXPECT_EQ(r.at("status").as_string(), "ok") << what;
        EXPECT_EQ(r.at("exit_code").as_int(), 0) << what;
        EXPECT_EQ(r.at("wrong").as_int(), 0) << what;
        EXPECT_EQ(r.at("command").at(2).as_string(), op == "p2p" ? "p2p" : "coll") << what;
        const auto& results = r.at("results").as_array();
        ASSERT_EQ(results.size(), kSizes.size()) << what;
        for (std::size_t s = 0; s < kSizes.size(); ++s) {
          EXPECT_EQ(results[s].at("bytes").as_int(), kSizes[s]) << what;
          EXPECT_GT(results[s].at("gbps").as_double(), 0) << what;
        }
        at_largest.push_back(results.back().at("gbps").as_double());
      }
      const auto& means = c.at("mean_gbps").as_array();
      ASSERT_EQ(means.size(), kSizes.size()) << what;
      EXPECT_EQ(means.back().at("runs").as_int(), 2) << what;
      EXPECT_DOUBLE_EQ(means.back().at("mean").as_double(), (at_largest[0] + at_largest[1]) / 2) << what;
    }
    // The gains: pickle ipc over pickle shm is measured; those against a skipped NCCL row are null.
    const auto& gains = operation.at("gains").as_array();
    ASSERT_EQ(gains.size(), 3u);
    for (const auto& g : gains) {
      bool pickle_only = g.at("fast").as_string() == "pickle-ipc";
      EXPECT_EQ(g.at("largest").is_null(), !pickle_only) << g.at("label").as_string();
      if (pickle_only) {
        double ipc_mean = config_of(operation, "pickle-ipc").at("mean_gbps").as_array().back().at("mean").as_double();
        double shm_mean = config_of(operation, "pickle-shm").at("mean_gbps").as_array().back().at("mean").as_double();
        EXPECT_DOUBLE_EQ(g.at("largest").as_double(), ipc_mean / shm_mean);
        EXPECT_EQ(g.at("per_size").size(), kSizes.size());
      }
    }
  }
}

// --lanes: seed 001's network comparison. NCCL is forced onto its Socket path (skipped on host memory, but its
// environment is checked), pickle onto its net transport with as many lanes; every pickle run moves checked data.
TEST(BenchTransports, LanesCompareNetPathsAtEachLaneCount) {
#ifndef PICKLE_HAVE_LIBFABRIC
  GTEST_SKIP() << "built without libfabric: no net transport";
#endif
  TempDir dir("bench-transports-lanes");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "transports", {"--lanes", "1,3", "--ops", "p2p", "--runs", "1", "-b", "64K", "-e",
                                               "1M", "-f", "4", "-n", "2", "-w", "1", "--repeats", "2", "--json",
                                               json_path},
                           {"PICKLE_NET_CHUNK=65536"});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  std::vector<std::string> p2p = section_lines(run.out, "p2p");
  for (const std::string lanes : {"1", "3"}) {
    auto nccl = row_of(p2p, "NCCL Socket, " + lanes + " socket(s)");
    ASSERT_FALSE(nccl.empty()) << run.out;
    EXPECT_EQ(nccl[0], "skipped:") << run.out;
    auto pickle = row_of(p2p, "pickle net, " + lanes + " lane(s)");
    ASSERT_GE(pickle.size(), 2u) << run.out;
    EXPECT_GT(std::stod(pickle[0]), 0) << run.out;
  }
  // The per-size table's columns are right-aligned under their labels, which are wider here than the defaults
  // ("pickle-net-1/nccl-socket-1"): the header and every row end at the same column (until 2026-11-29j the header
  // ran past the values).
  const auto header = std::find_if(p2p.begin(), p2p.end(), [](const std::string& line) {
    return line.starts_with("#       size");
  });
  ASSERT_NE(header, p2p.end()) << run.out;
  for (auto row = header + 1; row != p2p.end() && !row->empty() && row->front() != '#'; ++row) {
    EXPECT_EQ(row->size(), header->size()) << *header << "\n" << *row;
  }
  json::Value root = json::parse(read_file(json_path));
  const auto& operation = root.at("operations").at(0);
  ASSERT_EQ(operation.at("configurations").size(), 4u);
  for (const std::string lanes : {"1", "3"}) {
    const json::Value& nccl = config_of(operation, "nccl-socket-" + lanes);
    EXPECT_EQ(nccl.at("env").at("NCCL_NET").as_string(), "Socket");
    EXPECT_EQ(nccl.at("env").at("NCCL_P2P_DISABLE").as_string(), "1");
    EXPECT_EQ(nccl.at("env").at("NCCL_SHM_DISABLE").as_string(), "1");
    EXPECT_EQ(nccl.at("env").at("NCCL_SOCKET_IFNAME").as_string(), "lo");
    EXPECT_EQ(nccl.at("env").at("NCCL_SOCKET_NTHREADS").as_string(), lanes);
    // One channel per peer: NCCL's default two would open two connections of L sockets each.
    EXPECT_EQ(nccl.at("env").at("NCCL_NCHANNELS_PER_NET_PEER").as_string(), "1");
    const json::Value& pickle = config_of(operation, "pickle-net-" + lanes);
    EXPECT_EQ(pickle.at("status").as_string(), "ok") << pickle.at("detail").as_string();
    EXPECT_EQ(pickle.at("env").at("PICKLE_TRANSPORT").as_string(), "net");
    EXPECT_EQ(pickle.at("env").at("PICKLE_NET_LANES").as_string(), lanes);
    for (const auto& r : pickle.at("runs").as_array()) EXPECT_EQ(r.at("wrong").as_int(), 0);
  }
  const auto& gains = operation.at("gains").as_array();
  ASSERT_EQ(gains.size(), 2u);
  EXPECT_EQ(gains[0].at("fast").as_string(), "pickle-net-1");
  EXPECT_EQ(gains[0].at("slow").as_string(), "nccl-socket-1");
}

TEST(BenchTransports, BadLanesExitTwoBeforeAnyChild) {
  TempDir dir("bench-transports-bad-lanes");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--lanes", "0"},
                                               std::vector<std::string>{"--lanes", "1,x"},
                                               std::vector<std::string>{"--lanes", "2", "--iface", ""}}) {
    BenchRun run = run_bench(dir, "transports", args, {});
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.describe();
    EXPECT_NE(run.err.find("--"), std::string::npos) << run.err;
  }
}

TEST(BenchTransports, AChildWithWrongBytesFailsTheSuiteAndShowsWhy) {
  TempDir dir("bench-transports");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "transports", {"--ops", "p2p", "--runs", "2", "-b", "4K", "-e", "16K", "-n", "2",
                                               "-w", "1", "--repeats", "2", "--json", json_path},
                           {"PICKLE_BENCH_CORRUPT=1"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  // The child's error: which configuration and run, how the child ended, and the wrong bytes it counted.
  EXPECT_NE(run.err.find("pickle ipc run 1 FAILED: `pickle bench p2p --backend pickle` exited with code 1: 1 wrong "
                         "byte at 4K"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("its stderr, last lines:"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("# pickle shm FAILED in run 1: "), std::string::npos) << run.out;
  auto row = row_of(section_lines(run.out, "p2p"), "pickle ipc");
  ASSERT_GE(row.size(), 2u) << run.out;
  EXPECT_EQ(row[0], "FAILED") << run.out;
  EXPECT_EQ(row[1], "-") << run.out;  // run 2 was not started

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  const json::Value& operation = root.at("operations").at(0);
  EXPECT_EQ(config_of(operation, "nccl-p2p").at("status").as_string(), "skipped");
  for (const char* key : {"pickle-ipc", "pickle-shm"}) {
    const json::Value& c = config_of(operation, key);
    EXPECT_EQ(c.at("status").as_string(), "failed") << key;
    ASSERT_EQ(c.at("runs").size(), 1u) << key;
    const json::Value& r = c.at("runs").at(0);
    EXPECT_EQ(r.at("exit_code").as_int(), 1) << key;
    EXPECT_EQ(r.at("wrong").as_int(), 3) << key;  // one flipped byte at each of 4K, 8K, 16K
    EXPECT_NE(r.at("detail").as_string().find("wrong byte"), std::string::npos) << key;
  }
}

TEST(BenchTransports, BadFlagsExitWithTwoAndStartNothing) {
  const std::vector<std::vector<std::string>> cases = {
      {"--bogus"},         {"--runs", "0"},       {"--runs", "x"},     {"--ops", "p2p,broadcast"},
      {"--ops", "p2p,p2p"}, {"-b", "2M", "-e", "1M"}, {"-f", "1"},      {"--ranks", "1"},
      {"--memory", "disk"}, {"-e"}};
  for (const auto& args : cases) {
    TempDir dir("bench-transports");
    BenchRun run = run_bench(dir, "transports", args);
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << args[0] << ": " << run.describe();
    EXPECT_NE(run.err.find("usage: pickle bench transports"), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_EQ(run.err.find("configuration 1 of"), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
}

// --memory cuda where there is no GPU: one refusal before any child starts (each child used to fail alone, every
// configuration and run over).
TEST(BenchTransports, MemoryCudaWithoutAGpuIsRefusedBeforeAnyChildStarts) {
  if (device::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  TempDir dir("bench-transports");
  BenchRun run = run_bench(dir, "transports", {"--memory", "cuda", "--ops", "p2p", "-b", "4K", "-e", "4K"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  EXPECT_NE(run.err.find("--memory cuda needs a GPU, and this machine has none"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("configuration 1 of"), std::string::npos) << run.err;
}

// Ctrl-C (SIGINT) or SIGTERM while a child runs: the child is stopped, the scratch folder of the children's files
// goes, and the orchestrator then ends by that signal. Until 2026-11-29j the folder stayed behind in $TMPDIR. (A
// signal ignored at the start would stay ignored, but libinfinipath, loaded with libfabric's psm provider, replaces
// the process's SIGINT disposition before main, and pickle sets it back to the default: psm_signal_handlers.cpp.)
TEST(BenchTransports, AnInterruptedRunLeavesNoScratchFolderBehind) {
  TempDir dir("bench-transports-stop");
  const std::string tmp = dir / "tmp";
  ASSERT_EQ(::mkdir(tmp.c_str(), 0700), 0);
  const auto scratch_folders = [&] {
    int found = 0;
    if (DIR* folder = ::opendir(tmp.c_str())) {
      while (dirent* entry = ::readdir(folder)) found += std::string_view(entry->d_name).starts_with("pickle-") ? 1 : 0;
      ::closedir(folder);
    }
    return found;
  };
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    const std::string err = dir / ("err" + std::to_string(signal));
    pid_t pid = spawn_program({PICKLE_CLI_PATH, "bench", "transports", "--memory", "host", "--ops", "p2p", "-b", "16M",
                               "-e", "64M", "-n", "50", "--runs", "3"},
                              {"PICKLE_TIMEOUT=20", "TMPDIR=" + tmp}, dir / "out", err);
    // Interrupted once a child has started (its output files are in the scratch folder).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (read_file(err).find("configuration 3 of 4") == std::string::npos &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(scratch_folders(), 1) << read_file(err);
    ::kill(pid, signal);
    const ExitStatus status = wait_pid_or_kill(pid, std::chrono::seconds(60));
    EXPECT_EQ(status.signal, signal) << status.describe() << "\n" << read_file(err);
    EXPECT_EQ(scratch_folders(), 0) << "signal " << signal;
  }
}

// Its output piped into a reader that quits early (`| head`): the next progress line's write raises SIGPIPE, and the
// run ends by it (141 in the shell) with no folder left. Until 2026-11-30 SIGPIPE ended it at once, folder and all.
TEST(BenchTransports, OutputPipedIntoAReaderThatQuitsLeavesNoScratchFolderBehind) {
  TempDir dir("bench-transports-pipe");
  const std::string tmp = dir / "tmp";
  ASSERT_EQ(::mkdir(tmp.c_str(), 0700), 0);
  const std::string command = std::string("set -o pipefail; '") + PICKLE_CLI_PATH +
                              "' bench transports --memory host --ops p2p -b 16M -e 64M -n 50 --runs 3 2>&1 | "
                              "head -c 1 > /dev/null; echo ${PIPESTATUS[0]}";
  pid_t pid = spawn_program({"/bin/bash", "-c", command}, {"PICKLE_TIMEOUT=20", "TMPDIR=" + tmp}, dir / "out",
                            dir / "err");
  const ExitStatus status = wait_pid_or_kill(pid, std::chrono::seconds(120));
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << read_file(dir / "err");
  EXPECT_EQ(read_file(dir / "out"), "141\n") << read_file(dir / "err");  // 128 + SIGPIPE
  int left = 0;
  if (DIR* folder = ::opendir(tmp.c_str())) {
    while (dirent* entry = ::readdir(folder)) left += std::string_view(entry->d_name).starts_with("pickle-") ? 1 : 0;
    ::closedir(folder);
  }
  EXPECT_EQ(left, 0);
}

// As in p2p and interference (until 2026-11-30 transports ignored it and ran its four default configurations).
TEST(BenchTransports, AnIfaceWithoutLanesIsABadCommandLine) {
  TempDir dir("bench-transports");
  BenchRun run = run_bench(dir, "transports", {"--iface", "lo", "-b", "4K", "-e", "4K"});
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.describe();
  EXPECT_NE(run.err.find("--iface applies only with --lanes"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("configuration 1 of"), std::string::npos) << run.err;
}

TEST(BenchTransports, RefusesToRunAsARankOfALauncher) {
  TempDir dir("bench-transports");
  BenchRun run = run_bench(dir, "transports", {"--ops", "p2p", "-b", "4K", "-e", "4K"}, {"RANK=0", "WORLD_SIZE=2"});
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.describe();
  EXPECT_NE(run.err.find("run it alone"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

}  // namespace
}  // namespace pickle::test
