// `pickle bench interference --lanes 1,2` on whatever GPUs there are (--share-gpus: one is enough): one child per
// lane count and backend, each forced onto its library's network path over loopback, merged into one result file.
// pickle's rows at both lane counts must have moved checked data through the net transport and overlapped the
// foreground's window; NCCL, where the two ranks share a GPU, is unavailable (it refuses two ranks on one GPU), not
// failed. Skips with the reason without a GPU, without libfabric, or without the GEMM foreground.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "device/backends.hpp"
#include "../mp/bench_test_util.hpp"
#include "interference_rows.hpp"

namespace pickle::test {
namespace {

TEST(BenchInterferenceLanesCuda, PickleRowsAtEveryLaneCountNcclUnavailableOnASharedGpu) {
  const int gpus = device::cuda_device_count();
  if (gpus < 1) GTEST_SKIP() << "waived: needs a CUDA GPU (" << device::cuda_unavailable_reason() << ")";
#ifndef PICKLE_HAVE_LIBFABRIC
  GTEST_SKIP() << "waived: built without libfabric (no net transport to force)";
#endif
  TempDir dir("interference-lanes-cuda");
  const std::string json_path = dir / "result.json";
  const BenchRun run = run_bench(dir, "interference",
                                 {"--share-gpus", "--lanes", "1,2", "--backend", "pickle,nccl", "--foreground", "gemm",
                                  "-b", "4M", "-e", "4M", "-n", "3", "-w", "1", "--warmup-ms", "0", "--json", json_path},
                                 {"PICKLE_TIMEOUT=120"}, std::chrono::seconds(800));
  const std::string& out = run.out;
  const std::string context = run.describe();
  ASSERT_TRUE(run.status.ok()) << context;
  const json::Value root = json::parse(read_file(json_path));

  ASSERT_EQ(root.at("foregrounds").size(), 1u) << context;
  const json::Value gemm = root.at("foregrounds").at(0);
  if (gemm.at("status").as_string() == "unavailable") {
    GTEST_SKIP() << "waived: the gemm foreground is unavailable: " << gemm.at("detail").as_string();
  }
  EXPECT_EQ(root.at("exit_code").as_int(), 0) << context;
  EXPECT_EQ(root.at("options").at("lanes").dump(), "[1,2]");
  EXPECT_EQ(root.at("options").at("iface").as_string(), "lo");

  const bool shared = gpus < 2;
  ASSERT_EQ(root.at("traffic").size(), 4u) << context;
  std::set<std::pair<std::string, std::int64_t>> runs;
  for (const auto& t : root.at("traffic").as_array()) {
    const std::string backend = t.at("backend").as_string();
    const std::int64_t lanes = t.at("lanes").as_int();
    const std::string where = backend + " lanes " + std::to_string(lanes) + ": " + t.at("detail").as_string() + context;
    runs.insert({backend, lanes});
    if (backend == "pickle") {
      EXPECT_EQ(t.at("status").as_string(), "ok") << where;
      EXPECT_EQ(t.at("env").at("PICKLE_TRANSPORT").as_string(), "net") << where;
      EXPECT_EQ(t.at("env").at("PICKLE_NET_LANES").as_string(), std::to_string(lanes)) << where;
    } else if (shared) {
      EXPECT_EQ(t.at("status").as_string(), "unavailable") << where;
      EXPECT_NE(t.at("detail").as_string().find("NCCL needs a GPU per rank"), std::string::npos) << where;
    } else {
      EXPECT_NE(t.at("status").as_string(), "failed") << where;
      EXPECT_EQ(t.at("env").at("NCCL_NET").as_string(), "Socket") << where;
    }
  }
  EXPECT_EQ(runs, (std::set<std::pair<std::string, std::int64_t>>{{"nccl", 1}, {"nccl", 2}, {"pickle", 1},
                                                                    {"pickle", 2}}));

  std::set<std::int64_t> pickle_lanes;
  for (const auto& row : root.at("results").as_array()) {
    const std::string backend = row.at("backend").as_string();
    const std::int64_t lanes = row.at("lanes").as_int();
    const std::string where = backend + " lanes " + std::to_string(lanes) + context;
    EXPECT_EQ(row.at("background").as_string(), "p2p") << where;
    EXPECT_EQ(row.at("bytes").as_int(), 4 << 20) << where;
    expect_clean_row(row, where);
    if (backend == "pickle") pickle_lanes.insert(lanes);
    if (shared) {
      EXPECT_EQ(backend, "pickle") << "NCCL cannot measure on a shared GPU" << where;
    }
  }
  EXPECT_EQ(pickle_lanes, (std::set<std::int64_t>{1, 2})) << context;
  // The table: a lanes column, each traffic run's lane count.
  EXPECT_NE(out.find(" backend lanes "), std::string::npos) << context;
  EXPECT_NE(out.find("# p2p       pickle lanes 2 ok"), std::string::npos) << context;
  std::printf("[info] %s\n", out.c_str());
}

}  // namespace
}  // namespace pickle::test
