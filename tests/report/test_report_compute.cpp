// `pickle report` for the compute suite: a real `pickle bench compute --json` run with the GPUs hidden (waived) and a
// hand-written measured file whose numbers are known go in; report.md must say the first was waived and hold the
// table "foreground | kernel | ms | TFLOP/s | check" for the second, a row per foreground.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "report_test_util.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::string kComputeHeader = "| foreground | kernel | ms | TFLOP/s | check |";

/// gemm by cuBLASLt and attention by cuDNN, both checked; the attention changed 3 elements between repeats.
const char* kMeasured = R"json({
  "schema": "pickle-bench/1", "suite": "compute", "command": ["pickle", "bench", "compute"],
  "started_utc": "2026-01-01T00:00:00Z",
  "options": {"iterations": 20, "warmup": 5, "repeats": 5, "warmup_ms": 1000, "device": 0,
              "foregrounds": ["gemm", "attention"], "attention": "auto"},
  "waived": null, "device_name": "NVIDIA H200", "notes": [],
  "results": [
    {"name": "gemm", "kernel": "cuBLASLt 13.0.0", "description": "cuBLASLt bf16 8192x8192x8192, fp32 accumulate",
     "status": "ok", "detail": "fastest of 8 heuristic candidates: #2", "required": false, "flops": 1099511627776.0,
     "verify": {"max_error": 3.1e-05, "tolerance": 0.001, "shape": "64 sampled entries", "passed": true},
     "ms": 1.5, "min_ms": 1.49, "max_ms": 1.52, "samples_ms": [1.5, 1.49, 1.52, 1.5, 1.5], "tflops": 733.0,
     "changed": 0, "passed": true, "error": null},
    {"name": "attention", "kernel": "cuDNN SDPA (cudnn 9.19.0, frontend 1.32.0)",
     "description": "cuDNN SDPA (cudnn 9.19.0, frontend 1.32.0): bf16 forward", "status": "ok", "detail": "",
     "required": false, "flops": 4398046511104.0,
     "verify": {"max_error": 0.0021, "tolerance": 0.01, "shape": "heads 4, seq 512", "passed": true},
     "ms": 7.1, "min_ms": 7.0, "max_ms": 7.3, "samples_ms": [7.1, 7.0, 7.3], "tflops": 619.4,
     "changed": 3, "passed": false, "error": null}
  ],
  "exit_code": 1
})json";

TEST(ReportCompute, WaivedAndMeasuredRunsGiveTheirSections) {
  TempDir dir("report-compute");
  const std::string waived = dir / "waived.json", measured = dir / "measured.json";
  Result bench = run_pickle(dir, {"bench", "compute", "--json", waived}, std::chrono::seconds(60),
                            {"CUDA_VISIBLE_DEVICES="});
  ASSERT_TRUE(bench.status.ok()) << bench.status.describe() << "\n" << bench.err;
  std::ofstream(measured) << kMeasured;

  const std::string out = dir / "out";
  Result report = run_pickle(dir, {"report", waived, measured, "-o", out}, std::chrono::seconds(90));
  ASSERT_TRUE(report.status.ok()) << report.status.describe() << "\n" << report.err;
  EXPECT_EQ(report.err.find("not known"), std::string::npos) << report.err;
  const std::string md = read_file(out + "/report.md");
  EXPECT_NE(md.find("**Waived**: needs a CUDA GPU (found 0); nothing was measured."), std::string::npos) << md;

  auto found = tables(md, kComputeHeader);
  ASSERT_EQ(found.size(), 1u) << md;
  ASSERT_EQ(found[0].size(), 2u) << md;
  const std::vector<std::string> gemm = {"gemm", "cuBLASLt 13.0.0", "1.50 [1.49..1.52]", "733.0",
                                         "passed (max error 3.10e-05 (tolerance 1e-03), 0 changed)"};
  EXPECT_EQ(found[0][0], gemm);
  const std::vector<std::string> attention = {"attention", "cuDNN SDPA (cudnn 9.19.0, frontend 1.32.0)",
                                              "7.10 [7.00..7.30]", "619.4",
                                              "**failed** (max error 2.10e-03 (tolerance 1e-02), **3 changed**)"};
  EXPECT_EQ(found[0][1], attention);
  EXPECT_NE(md.find("GPU 0 (NVIDIA H200)"), std::string::npos) << md;
  EXPECT_EQ(check_plots(out, md), 0);
}

TEST(ReportCompute, TheGpuClockAndPowerStandBesideTheTimesWhenSampled) {
  TempDir dir("report-compute-clock");
  std::string text = kMeasured;
  // gemm sampled (60 readings, all at the power cap), attention not: its clock cells are dashes.
  const std::string gemm_end = R"("changed": 0, "passed": true, "error": null})";
  const std::size_t at = text.find(gemm_end);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, gemm_end.size(),
               R"("changed": 0, "passed": true, "error": null, "telemetry": {"samples": 60, "sm_mhz": 1755.4,)"
               R"( "power_w": 689.6, "power_capped": 1.0, "thermal": 0.0, "hw_slowdown": 0.0},)"
               R"( "copy_load": {"ms": 1.6, "min_ms": 1.58, "max_ms": 1.62, "samples_ms": [1.6, 1.58, 1.62],)"
               R"( "relative": 0.9375, "copy_gbps": 398.7, "telemetry": {"samples": 30, "sm_mhz": 1650.0,)"
               R"( "power_w": 699.0, "power_capped": 1.0, "thermal": 0.0, "hw_slowdown": 0.0}}})");
  const std::string notes = R"("notes": [],)";
  text.replace(text.find(notes), notes.size(),
               R"("notes": [], "telemetry_source": "NVML /usr/lib/libnvidia-ml.so.1, GPU 0000:18:00.0",)");
  const std::string measured = dir / "measured.json";
  std::ofstream(measured) << text;

  const std::string out = dir / "out";
  Result report = run_pickle(dir, {"report", measured, "-o", out}, std::chrono::seconds(90));
  ASSERT_TRUE(report.status.ok()) << report.status.describe() << "\n" << report.err;
  const std::string md = read_file(out + "/report.md");
  auto found =
      tables(md, "| foreground | kernel | ms | TFLOP/s | check | SM clock (MHz) | power (W) | at the power cap |");
  ASSERT_EQ(found.size(), 1u) << md;
  ASSERT_EQ(found[0].size(), 2u) << md;
  EXPECT_EQ(found[0][0][5], "1755") << md;
  EXPECT_EQ(found[0][0][6], "690") << md;
  EXPECT_EQ(found[0][0][7], "100% of 60 readings") << md;
  EXPECT_EQ(found[0][1][5], "—") << md;
  EXPECT_NE(md.find("GPU telemetry: NVML /usr/lib/libnvidia-ml.so.1, GPU 0000:18:00.0."), std::string::npos) << md;
  // --copy-load: a table of its own, gemm only (attention has no copy_load).
  auto loaded = tables(md, "| foreground | ms alone | ms under the copy load | relative | copy load (GB/s) | "
                           "SM clock alone -> loaded |");
  ASSERT_EQ(loaded.size(), 1u) << md;
  ASSERT_EQ(loaded[0].size(), 1u) << md;
  const std::vector<std::string> gemm_loaded = {"gemm", "1.50", "1.60 [1.58..1.62]", "0.938", "398.7",
                                                "1755 -> 1650 MHz (0.940), 690 -> 699 W"};
  EXPECT_EQ(loaded[0][0], gemm_loaded) << md;

  // A bad summary is refused, naming where it is.
  text.replace(text.find(R"("sm_mhz": 1755.4)"), 16, R"("sm_mhz": "fast")");
  std::ofstream(measured) << text;
  Result bad = run_pickle(dir, {"report", measured, "-o", dir / "bad"}, std::chrono::seconds(90));
  EXPECT_FALSE(bad.status.ok());
  EXPECT_NE(bad.err.find("results[0].telemetry.sm_mhz"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace pickle::test
