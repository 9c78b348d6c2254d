// `pickle bench scenario tp-pp --memory cuda` end to end: cuBLASLt's products with Llama-2 7B's shapes (two layers,
// short prompts), the allreduces and stage transfers of pickle and of NCCL (where it runs: two GPUs and the
// library), every transfer checked with known data and every timed pass's output against the first. Skips with the
// reason without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/json.hpp"
#include "device/backends.hpp"
#include "../mp/bench_test_util.hpp"

namespace pickle::test {
namespace {

TEST(BenchScenarioCuda, TpPpRunsTheLlamaShapesOnGpusWithEveryTransferChecked) {
  const int gpus = device::cuda_device_count();
  if (gpus < 1) GTEST_SKIP() << "waived: needs a CUDA GPU (" << device::cuda_unavailable_reason() << ")";
  TempDir dir("tp-pp-cuda");
  const std::string json_path = dir / "result.json";
  const BenchRun run = run_bench(dir, "scenario",
                                 {"tp-pp", "--memory", "cuda", "--model", "llama2-7b", "--layers", "2", "--batch",
                                  "1,2", "--seq", "64", "-n", "2", "--json", json_path},
                                 {"PICKLE_TIMEOUT=120"}, std::chrono::seconds(300));
  const std::string context = run.describe();
  ASSERT_TRUE(run.status.ok()) << context;
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 0) << context;
  EXPECT_EQ(root.at("options").at("model").as_string(), "llama2-7b");
  int pickle_runs = 0;
  for (const auto& r : root.at("results").as_array()) {
    const std::string backend = r.at("backend").as_string();
    pickle_runs += backend == "pickle";
    EXPECT_TRUE(r.at("error").is_null()) << backend << context;
    EXPECT_EQ(r.at("wrong").as_int(), 0) << backend << context;
    EXPECT_NE(r.at("compute").as_string().find("cuBLASLt"), std::string::npos) << backend;
    const auto& rows = r.at("rows").as_array();
    ASSERT_EQ(rows.size(), 4u) << backend;  // two prefill passes (1 x 64, 2 x 64 tokens), two decode steps
    for (const auto& row : rows) {
      EXPECT_EQ(row.at("wrong").as_int(), 0) << backend;
      for (const char* key : {"tp1_ms", "tp2_compute_ms", "tp2_ms", "pp2_ms"}) {
        EXPECT_GT(row.at(key).as_double(), 0) << backend << " " << key;
      }
    }
  }
  EXPECT_EQ(pickle_runs, 1) << context;
}

}  // namespace
}  // namespace pickle::test
