// `pickle bench compute` on a real GPU: both foregrounds are set up, checked against their reference kernels, timed,
// and give the same bits on every repeat; the attention names who computed it. Where cuDNN's SDPA runs under
// --attention auto, the own kernel is run too (--attention own); where it does not, --attention cudnn must fail and
// say why. Skips with the reason without a GPU. Prints the figures as [info] lines.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "device/backends.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::string kOwnKernel = "pickle fused attention (own kernel)";

struct ComputeRun {
  ExitStatus status;
  std::string out, err;
  json::Value root;
  std::string describe() const { return status.describe() + "\nstdout:\n" + out + "\nstderr:\n" + err; }
};

/// `pickle bench compute ARGS --json FILE`, short timings: loading cuDNN and building its plans (which may compile
/// kernels at run time) dominates, hence the generous wait.
ComputeRun run_compute(const TempDir& dir, std::vector<std::string> args) {
  static int counter = 0;
  const std::string tag = std::to_string(counter++), json_path = dir / ("result" + tag + ".json");
  std::vector<std::string> argv = {PICKLE_CLI_PATH, "bench", "compute", "-n", "5", "-r", "3", "-w", "2",
                                   "--warmup-ms", "200", "--json", json_path};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = spawn_program(argv, {"PICKLE_TIMEOUT=120"}, dir / ("out" + tag), dir / ("err" + tag));
  ComputeRun run;
  run.status = wait_pid_or_kill(pid, std::chrono::seconds(400));
  run.out = read_file(dir / ("out" + tag));
  run.err = read_file(dir / ("err" + tag));
  run.root = json::parse(read_file(json_path));
  return run;
}

void expect_measured(const json::Value& result, const std::string& context) {
  const std::string name = result.at("name").as_string();
  EXPECT_EQ(result.at("status").as_string(), "ok") << name << ": " << result.at("detail").as_string() << context;
  EXPECT_TRUE(result.at("passed").as_bool()) << name << context;
  EXPECT_TRUE(result.at("verify").at("passed").as_bool()) << name << context;
  EXPECT_GT(result.at("ms").as_double(), 0) << name << context;
  EXPECT_GT(result.at("tflops").as_double(), 0) << name << context;
  EXPECT_EQ(result.at("changed").as_int(), 0) << name << ": the same inputs must give the same bits" << context;
  std::printf("[info] %s by %s: %.3f ms per iteration (%.3f..%.3f), %.1f TFLOP/s; check max error %.2e\n",
              name.c_str(), result.at("kernel").as_string().c_str(), result.at("ms").as_double(),
              result.at("min_ms").as_double(), result.at("max_ms").as_double(), result.at("tflops").as_double(),
              result.at("verify").at("max_error").as_double());
  // NVML comes with the driver: the timed repeats have the GPU's clock and power beside them (a reading at the
  // start and the end of each repeat at least).
  const json::Value& telemetry = result.at("telemetry");
  ASSERT_FALSE(telemetry.is_null()) << name << context;
  EXPECT_GE(telemetry.at("samples").as_int(), 2) << name << context;
  EXPECT_GT(telemetry.at("sm_mhz").as_double(), 0) << name << context;
  EXPECT_GT(telemetry.at("power_w").as_double(), 0) << name << context;
  std::printf("[info] %s: SM %.0f MHz, %.0f W, at the power cap in %.0f%% of %lld readings\n", name.c_str(),
              telemetry.at("sm_mhz").as_double(), telemetry.at("power_w").as_double(),
              telemetry.at("power_capped").as_double() * 100,
              static_cast<long long>(telemetry.at("samples").as_int()));
}

TEST(BenchComputeCuda, TimesAndChecksBothForegroundsNamingTheAttentionKernel) {
  if (device::cuda_device_count() < 1) {
    GTEST_SKIP() << "waived: needs a CUDA GPU (" << device::cuda_unavailable_reason() << ")";
  }
  TempDir dir("compute-cuda");
  ComputeRun run = run_compute(dir, {});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  const std::string context = "\n" + run.out;
  ASSERT_EQ(run.root.at("results").size(), 2u) << context;
  EXPECT_EQ(run.root.at("telemetry_source").as_string().rfind("NVML ", 0), 0u) << context;
  EXPECT_NE(run.out.find("# clock: gemm: SM "), std::string::npos) << context;
  const json::Value& gemm = run.root.at("results").at(0);
  const json::Value& attention = run.root.at("results").at(1);
  EXPECT_EQ(gemm.at("kernel").as_string().rfind("cuBLASLt ", 0), 0u) << context;
  expect_measured(gemm, context);
  expect_measured(attention, context);
  // The sampler's thread reads the GPU every 5 ms: three repeats of five attention iterations (about 36 ms each)
  // give it about 18 readings; the two end readings alone would be 6.
  EXPECT_GE(attention.at("telemetry").at("samples").as_int(), 9) << context;
  const std::string kernel = attention.at("kernel").as_string();
  const bool cudnn = kernel.rfind("cuDNN SDPA (cudnn 9.", 0) == 0;
  EXPECT_TRUE(cudnn || kernel == kOwnKernel) << kernel;
  EXPECT_NE(run.out.find(kernel), std::string::npos) << "the table names the kernel" << context;

  if (cudnn) {
    ComputeRun own = run_compute(dir, {"--foreground", "attention", "--attention", "own"});
    ASSERT_TRUE(own.status.ok()) << own.describe();
    const json::Value& result = own.root.at("results").at(0);
    EXPECT_EQ(result.at("kernel").as_string(), kOwnKernel);
    expect_measured(result, "\n" + own.out);
  } else {
    std::printf("[info] --attention auto ran the own kernel: %s\n", attention.at("detail").as_string().c_str());
    ComputeRun forced = run_compute(dir, {"--foreground", "attention", "--attention", "cudnn"});
    EXPECT_TRUE(forced.status.exited && forced.status.code == 1) << "cuDNN was asked for by name" << forced.describe();
    const json::Value& result = forced.root.at("results").at(0);
    EXPECT_EQ(result.at("status").as_string(), "unavailable") << forced.out;
    EXPECT_TRUE(result.at("required").as_bool());
    EXPECT_NE(result.at("detail").as_string().find("cuDNN"), std::string::npos) << result.at("detail").as_string();
  }
}

/// --copy-load: the GEMM timed again beside copies inside its GPU; the copies really ran (their rate is reported and
/// above 0), the GEMM's output did not change under them, and the clock was read in both series.
TEST(BenchComputeCuda, UnderACopyLoadTheGemmIsTimedAgainAndStillGivesTheSameBits) {
  if (device::cuda_device_count() < 1) {
    GTEST_SKIP() << "waived: needs a CUDA GPU (" << device::cuda_unavailable_reason() << ")";
  }
  TempDir dir("compute-cuda-load");
  ComputeRun run = run_compute(dir, {"--foreground", "gemm", "--copy-load", "200"});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  const std::string context = "\n" + run.out;
  const json::Value& gemm = run.root.at("results").at(0);
  expect_measured(gemm, context);
  EXPECT_EQ(gemm.at("samples_ms").size(), 3u) << "the repeats alone: 2 before the load, 1 after" << context;
  const json::Value& loaded = gemm.at("copy_load");
  ASSERT_FALSE(loaded.is_null()) << context;
  EXPECT_EQ(loaded.at("samples_ms").size(), 3u) << context;
  EXPECT_GT(loaded.at("ms").as_double(), 0) << context;
  EXPECT_GT(loaded.at("copy_gbps").as_double(), 0) << context;
  EXPECT_GT(loaded.at("relative").as_double(), 0) << context;
  ASSERT_FALSE(loaded.at("telemetry").is_null()) << context;
  EXPECT_GT(loaded.at("telemetry").at("sm_mhz").as_double(), 0) << context;
  EXPECT_NE(run.out.find("# copy load: 200.0 GB/s asked"), std::string::npos) << context;
  std::printf("[info] gemm under a 200 GB/s copy load: %.3f ms (alone %.3f), relative %.3f, copies %.1f GB/s\n",
              loaded.at("ms").as_double(), gemm.at("ms").as_double(), loaded.at("relative").as_double(),
              loaded.at("copy_gbps").as_double());
}

}  // namespace
}  // namespace pickle::test
