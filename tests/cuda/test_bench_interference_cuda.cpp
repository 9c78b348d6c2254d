// `pickle bench interference` with an allgather background of 4 ranks on whatever GPUs there are (--share-gpus puts
// them round robin, so that one GPU is enough): every rank takes part, times its own foreground and checks every
// rank's section of what it gathered; the result file has 4 figures per row and no wrong byte; where the ranks share
// a GPU, the output says that the figures are functional only, and NCCL (which needs a GPU per rank) is unavailable,
// not failed. Then the raw copy engine's p2p background (--backend ce) beside pickle's: its rows checked alike, its
// allgather unavailable. Skips with the reason without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"
#include "device/backends.hpp"
#include "../mp/bench_test_util.hpp"
#include "interference_rows.hpp"

namespace pickle::test {
namespace {

constexpr int kRanks = 4;

/// The traffic entry of `backend` under `background` in the result file (by value: see test_bench_matrix.cpp on
/// GCC 13's -Wdangling-reference).
json::Value traffic_of(const json::Value& root, std::string_view background, std::string_view backend) {
  for (const auto& t : root.at("traffic").as_array()) {
    if (t.at("background").as_string() == background && t.at("backend").as_string() == backend) return t;
  }
  ADD_FAILURE() << "no traffic entry for " << background << " " << backend;
  return json::Value::object();
}


TEST(BenchInterferenceCuda, AnAllgatherOfFourRanksTimesAndChecksEveryRank) {
  const int gpus = device::cuda_device_count();
  if (gpus < 1) GTEST_SKIP() << "waived: needs a CUDA GPU (" << device::cuda_unavailable_reason() << ")";
  TempDir dir("interference-cuda");
  const std::string json_path = dir / "result.json";
  const BenchRun run = run_bench(dir, "interference",
                                 {"--share-gpus", "--ranks", std::to_string(kRanks), "--background", "allgather",
                                  "--backend", "pickle,nccl", "--foreground", "gemm", "-b", "4M", "-e", "4M", "-n",
                                  "3", "-w", "1", "--warmup-ms", "0", "--json", json_path},
                                 {"PICKLE_TIMEOUT=120"}, std::chrono::seconds(600));
  const std::string& out = run.out;
  const std::string context = run.describe();
  ASSERT_TRUE(run.status.ok()) << context;
  const json::Value root = json::parse(read_file(json_path));

  ASSERT_EQ(root.at("foregrounds").size(), 1u) << context;
  const json::Value gemm = root.at("foregrounds").at(0);
  if (gemm.at("status").as_string() == "unavailable") {
    GTEST_SKIP() << "waived: the gemm foreground is unavailable: " << gemm.at("detail").as_string();
  }
  EXPECT_EQ(gemm.at("status").as_string(), "ok") << context;
  EXPECT_EQ(root.at("options").at("world_size").as_int(), kRanks);
  EXPECT_EQ(root.at("allgather_ranks").as_int(), kRanks);
  EXPECT_EQ(root.at("exit_code").as_int(), 0) << context;

  const bool shared = gpus < kRanks;
  EXPECT_EQ(root.at("gpus_shared").as_bool(), shared) << context;
  if (shared) {
    EXPECT_NE(out.find("# note: --share-gpus: 4 ranks share"), std::string::npos) << context;
    EXPECT_NE(out.find("not interference figures"), std::string::npos) << context;
  }

  const json::Value pickle = traffic_of(root, "allgather", "pickle");
  EXPECT_EQ(pickle.at("status").as_string(), "ok") << pickle.at("detail").as_string() << context;
  const json::Value nccl = traffic_of(root, "allgather", "nccl");
  if (shared) {
    EXPECT_EQ(nccl.at("status").as_string(), "unavailable") << context;
    EXPECT_NE(nccl.at("detail").as_string().find("NCCL needs a GPU per rank"), std::string::npos) << context;
  } else {
    EXPECT_NE(nccl.at("status").as_string(), "failed") << nccl.at("detail").as_string() << context;
  }

  int pickle_rows = 0;
  for (const auto& row : root.at("results").as_array()) {
    const std::string backend = row.at("backend").as_string();
    const std::string where = backend + " " + std::to_string(row.at("bytes").as_int()) + context;
    EXPECT_EQ(row.at("background").as_string(), "allgather") << where;
    EXPECT_TRUE(row.at("error").is_null()) << where;
    EXPECT_EQ(row.at("ranks").as_int(), kRanks) << where;
    ASSERT_EQ(row.at("per_rank").size(), static_cast<std::size_t>(kRanks)) << where;
    for (int r = 0; r < kRanks; ++r) {
      const json::Value rank = row.at("per_rank").at(static_cast<std::size_t>(r));
      EXPECT_EQ(rank.at("rank").as_int(), r) << where;
      EXPECT_TRUE(rank.at("overlap").as_bool()) << "rank " << r << ": " << where;
      EXPECT_EQ(rank.at("background_wrong").as_int(), 0) << "rank " << r << ": " << where;
      EXPECT_EQ(rank.at("foreground_wrong").as_int(), 0) << "rank " << r << ": " << where;
      EXPECT_GT(rank.at("relative").as_double(), 0) << "rank " << r << ": " << where;
      // NVML comes with the driver: every window of every rank has its GPU's clock and power beside it.
      const json::Value& telemetry = rank.at("telemetry");
      EXPECT_EQ(telemetry.at("source").as_string().rfind("NVML ", 0), 0u) << telemetry.dump() << where;
      for (const char* window : {"alone_before", "with", "alone_after"}) {
        ASSERT_FALSE(telemetry.at(window).is_null()) << window << ": " << where;
        EXPECT_GE(telemetry.at(window).at("samples").as_int(), 2) << window << ": " << where;
        EXPECT_GT(telemetry.at(window).at("sm_mhz").as_double(), 0) << window << ": " << where;
      }
    }
    EXPECT_FALSE(row.at("telemetry_with").is_null()) << where;
    EXPECT_EQ(row.at("background_wrong").as_int(), 0) << where;
    EXPECT_TRUE(row.at("passed").as_bool()) << where;
    const double relative = row.at("relative").as_double();
    EXPECT_LE(row.at("relative_min").as_double(), relative) << where;
    EXPECT_GE(row.at("relative_max").as_double(), relative) << where;
    pickle_rows += backend == "pickle" ? 1 : 0;
  }
  EXPECT_EQ(pickle_rows, 1) << "one size (4 MiB) through pickle" << context;
  EXPECT_NE(out.find("# per rank: gemm allgather pickle 4194304: r0 "), std::string::npos) << context;
  std::printf("[info] %s\n", out.c_str());
}

TEST(BenchInterferenceCuda, TheRawCopyEngineRunsP2pBesidePickleAndHasNoAllgather) {
  // `--backend ce`: rank 0's cudaMemcpyAsync into rank 1's mapped buffer and a stream write-value, rank 1's
  // wait-value; its rows are checked as pickle's are. Own attention: no library to miss.
  const int gpus = device::cuda_device_count();
  if (gpus < 1) GTEST_SKIP() << "waived: needs a CUDA GPU (" << device::cuda_unavailable_reason() << ")";
  TempDir dir("interference-ce-cuda");
  const std::string json_path = dir / "result.json";
  const BenchRun run = run_bench(dir, "interference",
                                 {"--share-gpus", "--ranks", "2", "--background", "p2p,allgather", "--backend",
                                  "pickle,ce", "--foreground", "attention", "--attention", "own", "-b", "4M", "-e",
                                  "16M", "-f", "4", "-n", "3", "-w", "1", "--warmup-ms", "0", "--json", json_path},
                                 {"PICKLE_TIMEOUT=120"}, std::chrono::seconds(600));
  const std::string context = run.describe();
  ASSERT_TRUE(run.status.ok()) << context;
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 0) << context;

  const json::Value ce = traffic_of(root, "p2p", "ce");
  EXPECT_EQ(ce.at("status").as_string(), "ok") << context;
  EXPECT_NE(ce.at("detail").as_string().find("cudaMemcpyAsync into rank 1's receive buffer"), std::string::npos)
      << context;
  const json::Value allgather = traffic_of(root, "allgather", "ce");
  EXPECT_EQ(allgather.at("status").as_string(), "unavailable") << context;
  EXPECT_NE(allgather.at("detail").as_string().find("p2p background only"), std::string::npos) << context;

  int ce_rows = 0;
  for (const auto& row : root.at("results").as_array()) {
    if (row.at("backend").as_string() != "ce") continue;
    const std::string where = "ce " + std::to_string(row.at("bytes").as_int()) + context;
    EXPECT_EQ(row.at("background").as_string(), "p2p") << where;
    expect_clean_row(row, where);
    ++ce_rows;
  }
  EXPECT_EQ(ce_rows, 2) << "4 MiB and 16 MiB through ce" << context;
  EXPECT_NE(run.out.find("  attention       p2p      ce      4194304"), std::string::npos) << context;
  std::printf("[info] %s\n", run.out.c_str());
}

}  // namespace
}  // namespace pickle::test
