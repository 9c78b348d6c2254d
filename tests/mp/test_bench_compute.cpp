// `pickle bench compute` where it can run without a GPU: the real command says it is waived (exit 0, the waiver line,
// a result file that records why) with GPUs hidden, bad flags exit 2 naming the bad value before anything starts, and
// the options and the exit-code rules (an unavailable foreground is a fact about the machine unless it was asked for
// by name) are checked directly. tests/cuda/test_bench_compute_cuda.cpp runs it on a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/compute_options.hpp"
#include "../../tools/pickle/bench/compute_report.hpp"
#include "bench_test_util.hpp"
#include "core/json.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

using bench::AttentionImpl;
using bench::ComputeReport;
using bench::ComputeResult;
using bench::RunStatus;
using bench::parse_compute_options;

const std::string kNoGpu = "CUDA_VISIBLE_DEVICES=";

TEST(BenchCompute, WithoutAGpuItIsWaivedAndExitsZero) {
  TempDir dir("compute");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "compute", {"-n", "3", "--attention", "own", "--json", json_path}, {kNoGpu});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_TRUE(run.out.starts_with("compute: waived: needs a CUDA GPU (found 0)\n")) << run.describe();

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("schema").as_string(), "pickle-bench/1");
  EXPECT_EQ(root.at("suite").as_string(), "compute");
  EXPECT_EQ(root.at("waived").as_string(), "needs a CUDA GPU (found 0)");
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  EXPECT_EQ(root.at("results").size(), 0u);
  EXPECT_EQ(root.at("options").at("iterations").as_int(), 3);
  EXPECT_EQ(root.at("options").at("attention").as_string(), "own");
  EXPECT_EQ(root.at("command").at(2).as_string(), "compute");
  EXPECT_TRUE(root.at("topology").contains("host"));
  EXPECT_TRUE(root.contains("environment"));
}

TEST(BenchCompute, BadFlagsExitWithTwoNamingTheValue) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--attention", "bogus"}, "--attention: unknown value 'bogus' (choose from auto, cudnn, own)"},
      {{"--foreground", "bogus"}, "--foreground: unknown item 'bogus' (choose from gemm, attention)"},
      {{"--foreground", "gemm,gemm"}, "'gemm' is listed twice"},
      {{"-n", "0"}, "-n 0: must be between 1 and"},
      {{"-r", "0"}, "-r 0: must be between 1 and"},
      {{"--device", "x"}, "--device 'x': not an integer"},
      {{"-b", "4K"}, "unknown option '-b'"},
      {{"--attention"}, "--attention needs a value"},
      {{"--copy-load", "0"}, "--copy-load '0': expected GB/s, a number above 0"},
      {{"--copy-load", "fast"}, "--copy-load 'fast': expected GB/s"},
      {{"--copy-load", "400x"}, "--copy-load '400x': expected GB/s"}};
  for (const auto& [args, message] : cases) {
    TempDir dir("compute");
    BenchRun run = run_bench(dir, "compute", args, {kNoGpu});
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << args[0] << ": " << run.describe();
    EXPECT_NE(run.err.find(message), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_NE(run.err.find("usage: pickle bench compute"), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << args[0] << ": " << run.out;
  }
}

TEST(BenchCompute, HelpNamesBothAttentionKernels) {
  TempDir dir("compute");
  BenchRun run = run_bench(dir, "compute", {"--help"}, {kNoGpu});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.out.find("cuDNN SDPA"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("pickle fused attention (own kernel)"), std::string::npos) << run.out;
  run = run_bench(dir, "", {"--help"});
  EXPECT_NE(run.out.find("  compute "), std::string::npos) << "listed among the suites: " << run.out;
}

TEST(ComputeOptions, DefaultsAndEveryFlag) {
  bench::ComputeOptions o = parse_compute_options({});
  EXPECT_EQ(o.foregrounds, (std::vector<std::string>{"gemm", "attention"}));
  EXPECT_EQ(o.attention, AttentionImpl::Auto);
  EXPECT_EQ(o.iterations, 20);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_EQ(o.repeats, 5);
  EXPECT_EQ(o.warmup_ms, 1000);
  EXPECT_EQ(o.device, 0);
  EXPECT_EQ(o.copy_load_gbps, 0);
  o = parse_compute_options({"--foreground", "attention", "--attention", "cudnn", "-n", "7", "-w", "0", "-r", "3",
                             "--warmup-ms", "0", "--device", "1", "--json", "out.json", "--copy-load", "397.5"});
  EXPECT_EQ(o.copy_load_gbps, 397.5);
  EXPECT_EQ(o.foregrounds, (std::vector<std::string>{"attention"}));
  EXPECT_EQ(o.attention, AttentionImpl::Cudnn);
  EXPECT_EQ(o.iterations, 7);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.repeats, 3);
  EXPECT_EQ(o.warmup_ms, 0);
  EXPECT_EQ(o.device, 1);
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_TRUE(parse_compute_options({"-h"}).help);
}

ComputeResult measured(const std::string& name, std::vector<double> ms, std::uint64_t changed) {
  ComputeResult result;
  result.info.name = name;
  result.info.flops = 2e12;
  result.ms = std::move(ms);
  result.changed = changed;
  return result;
}

TEST(ComputeReport, MedianTflopsAndExitCodes) {
  ComputeResult gemm = measured("gemm", {2.0, 1.0, 4.0, 3.0}, 0);
  EXPECT_DOUBLE_EQ(gemm.median_ms(), 2.5);
  EXPECT_DOUBLE_EQ(gemm.min_ms(), 1.0);
  EXPECT_DOUBLE_EQ(gemm.max_ms(), 4.0);
  EXPECT_DOUBLE_EQ(gemm.tflops(), 2e12 / 2.5e-3 / 1e12);
  EXPECT_TRUE(gemm.passed());

  ComputeReport report;
  report.results.push_back(gemm);
  EXPECT_EQ(report.exit_code(), 0);

  ComputeResult attention;  // cuDNN missing under --attention auto would have fallen back; here it is just absent
  attention.info.name = "attention";
  attention.info.status = RunStatus::Unavailable;
  report.results.push_back(attention);
  EXPECT_EQ(report.exit_code(), 0) << "an unavailable library is a fact about the machine";
  report.results.back().info.required = true;  // --attention cudnn asked for it by name
  EXPECT_EQ(report.exit_code(), 1);

  report.results.back() = measured("attention", {7.0}, 3);
  EXPECT_FALSE(report.results.back().passed());
  EXPECT_EQ(report.exit_code(), 1) << "a changed output fails the run";
  report.results.back() = measured("attention", {}, 0);
  report.results.back().error = "timing failed";
  EXPECT_EQ(report.exit_code(), 1);
}

/// What print_compute_table writes.
std::string printed(const ComputeReport& report) {
  return printed_by([&](std::FILE* out) { bench::print_compute_table(report, out); });
}

TEST(ComputeReport, TheCopyLoadGivesItsOwnTableAndKeysWithTheClockAloneAndLoaded) {
  ComputeReport report;
  report.options = parse_compute_options({"--copy-load", "400"});
  report.device_name = "NVIDIA H200";
  ComputeResult gemm = measured("gemm", {1.50, 1.52, 1.51, 1.49}, 0);
  gemm.telemetry = bench::TelemetrySummary{.samples = 40, .sm_mhz = 1500, .power_w = 690, .power_capped = 1};
  gemm.loaded.emplace();
  gemm.loaded->ms = {1.60, 1.58, 1.62};
  gemm.loaded->copy_gbps = 398.7;
  gemm.loaded->telemetry = bench::TelemetrySummary{.samples = 30, .sm_mhz = 1410, .power_w = 699, .power_capped = 1};
  EXPECT_NEAR(gemm.relative(), 1.505 / 1.60, 1e-12);
  report.results.push_back(gemm);
  report.results.push_back(measured("attention", {7.0}, 0));  // no load figures: no row in the load table
  EXPECT_EQ(report.results.back().relative(), 0);

  const std::string out = printed(report);
  EXPECT_NE(out.find("# copy load: 400.0 GB/s asked, 64 MiB device-to-device copies"), std::string::npos) << out;
  EXPECT_NE(out.find("\n       gemm       1.505       1.600     0.941       398.7\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("\n  attention", out.find("# copy load:")), std::string::npos) << out;
  EXPECT_NE(out.find("# clock: gemm alone -> loaded: SM 1500 -> 1410 MHz (0.940), power 690 -> 699 W, power cap "
                     "100% -> 100%\n"),
            std::string::npos)
      << out;

  const json::Value root = bench::compute_to_json(report);
  EXPECT_EQ(root.at("options").at("copy_load_gbps").as_double(), 400);
  const json::Value& loaded = root.at("results").at(0).at("copy_load");
  EXPECT_NEAR(loaded.at("ms").as_double(), 1.60, 1e-12);
  EXPECT_NEAR(loaded.at("relative").as_double(), 1.505 / 1.60, 1e-12);
  EXPECT_NEAR(loaded.at("copy_gbps").as_double(), 398.7, 1e-12);
  EXPECT_EQ(loaded.at("samples_ms").size(), 3u);
  EXPECT_NEAR(loaded.at("telemetry").at("sm_mhz").as_double(), 1410, 1e-12);
  EXPECT_TRUE(root.at("results").at(1).at("copy_load").is_null());
}

}  // namespace
}  // namespace pickle::test
