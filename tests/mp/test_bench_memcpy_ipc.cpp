// `pickle bench memcpy` and `pickle bench ipc` end to end on host memory: the real command launches its two ranks,
// rank 0 copies into (or maps) rank 1's memfd buffer, rank 1 checks the bytes, and rank 0 writes the seed-shaped
// CSV and the result files. Also: pickle's mapping cache opens one mapping for the first transfer and none after,
// bad flags exit 2, a GPU-only option on host memory is refused with a message that says so, and a rank stopped
// mid-run ends the run with exit 1 and what was measured before it.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

#include "bench_test_util.hpp"
#include "core/json.hpp"
#include "device/backends.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

constexpr const char* kSeedHeader =
    "Chunk Size (Bytes), Async Without Overhead (ms), Async Without Overhead (GB/s), Sync Without Overhead (ms), "
    "Sync Without Overhead (GB/s), Sync With Overhead (ms), Sync With Overhead (GB/s)";

TEST(BenchMemcpy, HostMemoryWritesTheSeedCsvAndMovesEveryByteIntact) {
  TempDir dir("memcpy");
  const std::string csv = dir / "memcpy.csv", json_path = dir / "memcpy.json";
  BenchRun run = run_bench(dir, "memcpy", {"-b", "4K", "-e", "256K", "-n", "2", "-w", "1", "--memory", "host",
                                           "--csv", csv, "--json", json_path});
  ASSERT_TRUE(run.status.ok()) << run.describe();

  // 4K, 16K, 64K, 256K: size, then ms and GB/s for each of the 3 columns, then #wrong.
  auto rows = table_rows(run.out);
  ASSERT_EQ(rows.size(), 4u) << run.out;
  const char* sizes[] = {"4096", "16384", "65536", "262144"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 8u) << run.out;
    EXPECT_EQ(rows[i][0], sizes[i]);
    for (int c = 1; c <= 6; ++c) EXPECT_GT(std::stod(rows[i][c]), 0) << "column " << c << " of row " << sizes[i];
    EXPECT_EQ(rows[i][7], "0") << "#wrong of row " << sizes[i];
  }

  auto csv_lines = lines(read_file(csv));
  ASSERT_EQ(csv_lines.size(), 5u) << read_file(csv);
  EXPECT_EQ(csv_lines[0], kSeedHeader);
  const char* seed_sizes[] = {"4.00 KB, ", "16.00 KB, ", "64.00 KB, ", "256.00 KB, "};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(csv_lines[i + 1].rfind(seed_sizes[i], 0), 0u) << csv_lines[i + 1];
    EXPECT_EQ(std::count(csv_lines[i + 1].begin(), csv_lines[i + 1].end(), ','), 6) << csv_lines[i + 1];
  }

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("schema").as_string(), "pickle-bench/1");
  EXPECT_EQ(root.at("suite").as_string(), "memcpy");
  EXPECT_EQ(root.at("options").at("memory").as_string(), "host");
  EXPECT_EQ(root.at("options").at("method").as_string(), "memfd");
  EXPECT_EQ(root.at("options").at("max_bytes").as_int(), 256 * 1024);
  EXPECT_TRUE(root.at("environment").contains("PICKLE_TIMEOUT"));
  EXPECT_TRUE(root.at("topology").contains("host"));
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  const auto& results = root.at("results").as_array();
  ASSERT_EQ(results.size(), 4u);
  for (const auto& r : results) {
    for (const char* column : {"async", "sync", "sync_overhead"}) {
      const auto& c = r.at(column);
      EXPECT_GT(c.at("ms").as_double(), 0) << column;
      EXPECT_GT(c.at("gbps").as_double(), 0) << column;
      EXPECT_EQ(c.at("wrong").as_int(), 0) << column;
      EXPECT_FALSE(c.at("samples_ms").as_array().empty()) << column;
    }
    EXPECT_EQ(r.at("sync").at("samples_ms").as_array().size(), 2u);
    EXPECT_TRUE(r.at("error").is_null());
  }
}

TEST(BenchMemcpy, ACorruptedSourceByteIsCountedInEveryColumnAndFailsTheRun) {
  TempDir dir("memcpy-corrupt");
  const std::string json_path = dir / "memcpy.json";
  BenchRun run = run_bench(dir, "memcpy", {"-b", "4K", "-e", "16K", "-n", "1", "-w", "0", "--memory", "host",
                                           "--json", json_path},
                           {"PICKLE_BENCH_CORRUPT=1"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  auto rows = table_rows(run.out);
  ASSERT_EQ(rows.size(), 2u) << run.out;
  for (const auto& row : rows) EXPECT_EQ(row.back(), "3") << "one wrong byte per column\n" << run.out;
  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  EXPECT_EQ(root.at("results").at(0).at("sync_overhead").at("wrong").as_int(), 1);
  EXPECT_NE(run.err.find("pickle bench memcpy: FAILED: 6 wrong bytes in the data checks of 2 rows (4096 B; 16384 B)"),
            std::string::npos)
      << run.err;
}

TEST(BenchIpc, HostMemoryMeasuresImportsAndTheCacheOpensOnceThenNever) {
  TempDir dir("ipc");
  const std::string json_path = dir / "ipc.json";
  BenchRun run = run_bench(dir, "ipc", {"-b", "4K", "-e", "1M", "-n", "2", "-w", "1", "--memory", "host", "--json",
                                        json_path});
  ASSERT_TRUE(run.status.ok()) << run.describe();

  // 4K .. 1M by 4 for memfd (method, size, 3 x "median [min..max]", #wrong), then the cache's two rows.
  auto rows = table_rows(run.out);
  ASSERT_EQ(rows.size(), 5u + 2u) << run.out;
  for (std::size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(rows[i].size(), 9u) << run.out;
    EXPECT_EQ(rows[i][0], "memfd");
    EXPECT_EQ(rows[i][8], "0") << "#wrong of " << rows[i][1];
  }
  ASSERT_GE(rows[5].size(), 5u) << run.out;
  EXPECT_EQ(rows[5][0] + " " + rows[5][1], "cache first");
  EXPECT_EQ(rows[5][3], "1") << "the first transfer maps the receive allocation once\n" << run.out;
  EXPECT_EQ(rows[6][0] + " " + rows[6][1], "cache steady");
  EXPECT_EQ(rows[6][rows[6].size() - 2], "0") << "the steady state must open nothing\n" << run.out;
  // The cache's measurement has a progress line of its own (it ran silent for seconds with a large -n).
  EXPECT_NE(run.err.find("bench ipc: pickle's mapping cache: the first transfer, then 2 more"), std::string::npos)
      << run.err;

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("schema").as_string(), "pickle-bench/1");
  EXPECT_EQ(root.at("suite").as_string(), "ipc");
  EXPECT_EQ(root.at("options").at("memory").as_string(), "host");
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  const auto& results = root.at("results").as_array();
  ASSERT_EQ(results.size(), 5u);
  for (const auto& r : results) {
    EXPECT_EQ(r.at("method").as_string(), "memfd");
    EXPECT_EQ(r.at("status").as_string(), "ok");
    EXPECT_EQ(r.at("wrong").as_int(), 0);
    for (const char* key : {"open_us", "close_us", "reopen_us"}) {
      EXPECT_EQ(r.at(key).at("samples").as_array().size(), 2u) << key;
      EXPECT_GT(r.at(key).at("median").as_double(), 0) << key;
    }
  }
  const auto& cache = root.at("cache");
  EXPECT_EQ(cache.at("bytes").as_int(), 4096);
  EXPECT_EQ(cache.at("first_ipc_opens").as_int(), 1);
  EXPECT_EQ(cache.at("steady_ipc_opens").as_int(), 0);
  EXPECT_EQ(cache.at("wrong").as_int(), 0);
  EXPECT_GT(cache.at("first_us").as_double(), 0);
  EXPECT_EQ(cache.at("steady_us").at("samples").as_array().size(), 2u);
}

TEST(BenchMemcpyIpc, BadFlagsAndGpuOnlyOptionsOnHostMemoryExit2) {
  TempDir dir("flags");
  for (const auto& [suite, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"memcpy", {"--bogus"}},
           {"memcpy", {"-b", "1M", "-e", "4K"}},
           {"memcpy", {"--method", "malloc"}},
           {"memcpy", {"--method", "vmm", "--memory", "host"}},
           {"memcpy", {"--json", ""}},
           {"memcpy", {"--csv", "same", "--json", "same"}},  // one would replace the other
           {"memcpy", {"--csv", "same", "--json", "./same"}},
           {"ipc", {"-n", "0"}},
           {"ipc", {"--method", "vmm,vmm"}},
           {"ipc", {"--method", "cudaMalloc", "--memory", "host"}}}) {
    BenchRun run = run_bench(dir, suite, args);
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << suite << " " << args[0] << ": " << run.describe();
    EXPECT_NE(run.err.find("pickle bench " + suite + ":"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("launching 2 ranks"), std::string::npos) << run.err;  // nothing launched
  }
  // With the default memory, --method is refused where there are no 2 GPUs (a GPU machine runs it), before any rank
  // starts, as a bad command line is (until 2026-11-30 the ranks found it after the launch).
  BenchRun run = run_bench(dir, "memcpy", {"--method", "cudaMalloc", "-e", "4K", "-n", "1", "-w", "0"});
  if (run.err.find("needs GPU memory") != std::string::npos) {
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.describe();
    EXPECT_EQ(run.err.find("launching 2 ranks"), std::string::npos) << run.err;
    EXPECT_EQ(count_of(run.err, "needs GPU memory"), 1u) << run.err;
  } else {
    EXPECT_TRUE(run.status.ok()) << run.describe();
  }
}

// --memory cuda where there is no GPU: one refusal before the ranks start (each rank used to fail in its own
// cudaSetDevice, and the launcher then stopped the other).
TEST(BenchMemcpyIpc, MemoryCudaWithoutAGpuIsRefusedBeforeAnyRankStarts) {
  if (device::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  TempDir dir("memory-cuda");
  for (const std::string suite : {"memcpy", "ipc"}) {
    BenchRun run = run_bench(dir, suite, {"--memory", "cuda", "-b", "4K", "-e", "4K"});
    EXPECT_TRUE(run.status.exited && run.status.code == 1) << suite << ": " << run.describe();
    EXPECT_NE(run.err.find("--memory cuda needs a GPU, and this machine has none"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("launching 2 ranks"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("cudaSetDevice"), std::string::npos) << run.err;
  }
}

// --- a rank that stops mid-run (SIGSTOP: alive, holding its connections, answering nothing)

// memcpy: rank 1 stopped once rank 0's progress says some sizes are measured (in either pass). The size that was cut
// off is reported failed, the sizes before it with every byte checked, on stdout and in the JSON and CSV files.
TEST(BenchMemcpy, ARankThatStopsMidSweepEndsTheRunWithWhatWasMeasured) {
  TempDir dir("memcpy-stop");
  const std::string csv = dir / "memcpy.csv", json_path = dir / "memcpy.json";
  // 300 ms after the first progress line, which comes at the end of pass 1 (about 4 s in here): inside pass 2, past
  // the unmap between the passes (a stop that landed there failed no row until 2026-11-30, which made this flaky).
  const StoppedRun run = run_and_stop_rank1(dir, {"memcpy", "--memory", "host", "-b", "1M", "-e", "256M", "-f", "2",
                                                  "-n", "20", "-w", "2", "--csv", csv, "--json", json_path},
                                            StopWhen{.text = "done (step ", .delay = std::chrono::milliseconds(300)});
  expect_the_stop_ended_the_run(run, "memcpy");
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  const auto& results = root.at("results").as_array();
  std::size_t measured = 0, cut = 0;
  for (const auto& r : results) {
    if (!r.at("error").is_null()) {
      ++cut;
      EXPECT_NE(r.at("error").as_string().find("could not exchange"), std::string::npos) << r.at("error").as_string();
    } else if (!r.at("async").is_null()) {
      ++measured;
    }
    for (const char* column : {"async", "sync", "sync_overhead"}) {
      if (r.at(column).is_null()) continue;
      EXPECT_EQ(r.at(column).at("wrong").as_int(), 0) << column << " of " << r.at("bytes").as_int();
    }
  }
  EXPECT_GE(measured, 1u);
  EXPECT_EQ(cut, 1u);
  EXPECT_EQ(table_rows(run.out).size(), results.size()) << run.out;
  EXPECT_NE(run.out.find("FAILED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" failed: "), std::string::npos) << run.out;
  const auto csv_lines = lines(read_file(csv));
  ASSERT_GE(csv_lines.size(), 1u + measured);  // the header, then the sizes that did not fail
  EXPECT_EQ(csv_lines[0], kSeedHeader);
}

// ipc: rank 1 stopped while the sizes are swept (-w keeps each size busy for a while, with few samples to carry).
// The size that was cut off is reported failed, the ones before it with their ends checked; the cache never ran.
TEST(BenchIpc, ARankThatStopsMidSweepEndsTheRunWithWhatWasMeasured) {
  TempDir dir("ipc-stop");
  const std::string json_path = dir / "ipc.json";
  const StoppedRun run = run_and_stop_rank1(dir, {"ipc", "--memory", "host", "-b", "4K", "-e", "256M", "-f", "2", "-n",
                                                  "20", "-w", "100000", "--json", json_path});
  expect_the_stop_ended_the_run(run, "ipc");
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  const auto& results = root.at("results").as_array();
  ASSERT_GE(results.size(), 2u);
  for (std::size_t i = 0; i + 1 < results.size(); ++i) {
    EXPECT_EQ(results[i].at("status").as_string(), "ok") << results[i].at("bytes").as_int();
    EXPECT_EQ(results[i].at("wrong").as_int(), 0) << results[i].at("bytes").as_int();
  }
  const auto& cut = results.back();
  EXPECT_EQ(cut.at("status").as_string(), "failed");
  const std::string detail = cut.at("detail").as_string();
  EXPECT_NE(detail.find("could not exchange"), std::string::npos) << detail;
  EXPECT_TRUE(root.at("cache").at("first_us").is_null());
  // It did not run: no counts that read as measured (until 2026-11-30 they were 0), and the file says so.
  EXPECT_FALSE(root.at("cache").at("ran").as_bool());
  EXPECT_TRUE(root.at("cache").at("wrong").is_null());
  EXPECT_TRUE(root.at("cache").at("steady_ipc_opens").is_null());
  EXPECT_EQ(root.at("cache").at("error").as_string(), "did not run");
  // Every size on stdout, the one cut off FAILED with its error; the cache says it did not run.
  EXPECT_EQ(table_rows(run.out).size(), results.size()) << run.out;
  EXPECT_NE(run.out.find("FAILED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("# memfd failed: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("# cache measurement failed: did not run"), std::string::npos) << run.out;
}

// ipc: rank 1 stopped while pickle's mapping cache is measured (one quick size, then -n transfers of the cache, each
// three agreed phases: about 20 s here). The size is reported, the cache failed with the error; the communicator
// whose peer is gone is left as it is (its goodbye would wait for the peer). The stop waits for rank 0's progress line
// of the cache: a fixed 2 s from the start fell inside the size on a busy host (the size takes 1.5 s on an idle one).
TEST(BenchIpc, ARankThatStopsInTheCacheMeasurementEndsTheRunWithWhatWasMeasured) {
  TempDir dir("ipc-cache-stop");
  const std::string json_path = dir / "ipc.json";
  const StoppedRun run = run_and_stop_rank1(dir, {"ipc", "--memory", "host", "-b", "4K", "-e", "4K", "-n", "50000",
                                                  "-w", "1", "--json", json_path},
                                            {.text = "pickle's mapping cache", .delay = std::chrono::milliseconds(500)});
  expect_the_stop_ended_the_run(run, "ipc");
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  ASSERT_EQ(root.at("results").size(), 1u);
  EXPECT_EQ(root.at("results").at(0).at("status").as_string(), "ok");
  EXPECT_EQ(root.at("results").at(0).at("wrong").as_int(), 0);
  const auto& cache = root.at("cache");
  ASSERT_FALSE(cache.at("error").is_null()) << run.describe();
  EXPECT_NE(cache.at("error").as_string().find("could not exchange how phase 'cache "), std::string::npos)
      << cache.at("error").as_string();
  EXPECT_EQ(cache.at("wrong").as_int(), 0);
  EXPECT_EQ(table_rows(run.out).size(), 1u) << run.out;
  EXPECT_NE(run.out.find("# cache measurement failed: "), std::string::npos) << run.out;
}

}  // namespace
}  // namespace pickle::test
