// `pickle bench memcpy` and `pickle bench ipc` end to end on host memory: the real command launches its two ranks,
// rank 0 copies into (or maps) rank 1's memfd buffer, rank 1 checks the bytes, and rank 0 writes the seed-shaped
// CSV and the result files. Also: pickle's mapping cache opens one mapping for the first transfer and none after,
// bad flags exit 2, and a GPU-only option on host memory is refused with a message that says so.
#include <gtest/gtest.h>

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
  }
  // With the default memory, --method is refused by the ranks once they find no 2 GPUs (a GPU machine runs it).
  BenchRun run = run_bench(dir, "memcpy", {"--method", "cudaMalloc", "-e", "4K", "-n", "1", "-w", "0"});
  if (run.err.find("needs GPU memory") != std::string::npos) {
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.describe();
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

}  // namespace
}  // namespace pickle::test
