// `pickle bench p2p --memory cuda` end to end on whatever GPUs there are: every byte the pickle and ce backends
// move between the two ranks is checked, and where the ranks share one GPU (a one-GPU machine) the table and the
// result file say that the times measure no link. Skips with the reason without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/json.hpp"
#include "device/backends.hpp"
#include "../mp/bench_test_util.hpp"

namespace pickle::test {
namespace {

TEST(BenchP2pCuda, GpuMemoryMovesIntactAndASharedGpuIsSaid) {
  const int gpus = device::cuda_device_count();
  if (gpus < 1) GTEST_SKIP() << "waived: needs a CUDA GPU (" << device::cuda_unavailable_reason() << ")";
  TempDir dir("p2p-cuda");
  const std::string json_path = dir / "result.json";
  const BenchRun run = run_bench(dir, "p2p",
                                 {"--memory", "cuda", "--backend", "pickle,ce", "-b", "4K", "-e", "1M", "-f", "16",
                                  "-n", "5", "-w", "1", "--json", json_path},
                                 {"PICKLE_TIMEOUT=120"}, std::chrono::seconds(300));
  const std::string context = run.describe();
  ASSERT_TRUE(run.status.ok()) << context;
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 0) << context;

  const bool shared = gpus < 2;
  EXPECT_EQ(root.at("gpus_shared").as_bool(), shared) << context;
  EXPECT_EQ(run.out.find("share one GPU") != std::string::npos, shared) << context;

  int rows = 0;
  for (const auto& r : root.at("results").as_array()) {
    const std::string what = r.at("backend").as_string() + " " + r.at("mode").as_string() + " " +
                             std::to_string(r.at("bytes").as_int()) + context;
    EXPECT_TRUE(r.at("error").is_null()) << what;
    EXPECT_EQ(r.at("wrong").as_int(), 0) << what;
    if (r.at("backend").as_string() == "pickle") {
      // With lanes (the default), back-to-back sends (uni, bi: five per repeat behind the gate) write their completions
      // on a lane from the second on; the ping-pong (lat) waits before each send, and writes none there
      // (completion_lanes.hpp).
      // A row enqueued with the gate open may find each write run before the next send comes: then none.
      const auto lane_writes = r.at("completion_lane_writes_timed").as_int();
      if (r.at("mode").as_string() == "lat") {
        EXPECT_EQ(lane_writes, 0) << what;
      } else if (r.at("gated").as_bool()) {
        EXPECT_GT(lane_writes, 0) << what;
      }
    }
    ++rows;
  }
  EXPECT_EQ(rows, 2 * 3 * 3) << context;  // pickle and ce, uni/bi/lat, 4 KiB, 64 KiB, 1 MiB
}

}  // namespace
}  // namespace pickle::test
