#pragma once
// What a `pickle bench compute` run measured, and its two renderings: the human table (stdout) and the result file
// (--json, schema "pickle-bench/1", suite "compute", keys in docs/bench.md). A waived run (no GPU) is a report with
// `waived` set.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "compute_options.hpp"
#include "core/json.hpp"
#include "foreground_info.hpp"
#include "gpu_telemetry.hpp"

namespace pickle::bench {

/// --copy-load: the foreground's repeats with copies running inside its GPU.
struct LoadedRepeats {
  std::vector<double> ms;                     ///< ms per iteration of each loaded repeat, in order
  std::optional<TelemetrySummary> telemetry;  ///< over the loaded repeats
  double copy_gbps = 0;                       ///< the copy rate reached while they ran

  /// Median, smallest and largest of `ms`; 0 when empty.
  double median_ms() const;
  double min_ms() const;
  double max_ms() const;
};

/// One foreground, set up and timed alone (and with the copy load, with --copy-load).
struct ComputeResult {
  ForegroundInfo info;
  std::vector<double> ms;                ///< ms per iteration of each repeat, in order; empty when not measured
  std::optional<std::uint64_t> changed;  ///< output elements that differ from the first result after the repeats
  std::string error;                     ///< why timing failed (a set-up failure is in info)
  /// The GPU's clock and power over the timed repeats (gpu_telemetry.hpp); unset where NVML could not sample.
  std::optional<TelemetrySummary> telemetry;
  std::optional<LoadedRepeats> loaded;  ///< --copy-load only

  /// Median alone / median with the copy load (1: the load costs nothing); 0 without both.
  double relative() const;

  /// Median, smallest and largest of `ms`; 0 when not measured.
  double median_ms() const;
  double min_ms() const;
  double max_ms() const;
  /// info.flops per median iteration, in 1e12 per second; 0 when not measured.
  double tflops() const;
  /// Set up, checked, timed, and not one element changed.
  bool passed() const;
};

struct ComputeReport {
  ComputeOptions options;
  std::vector<std::string> command;  ///< the command line as typed
  std::string started_utc;
  std::string waived;       ///< non-empty: why nothing ran ("needs a CUDA GPU (found 0)")
  std::string device_name;  ///< the GPU's name, as CUDA reports it
  std::string telemetry_source;  ///< what sampled the GPU (GpuTelemetry::describe), or why nothing did
  std::vector<std::string> notes;
  std::vector<ComputeResult> results;

  /// 1 when a foreground failed (or was required and is unavailable), could not be timed or changed its output; 0
  /// otherwise (an unavailable foreground alone is a fact about the machine).
  int exit_code() const;
};

/// The table: a line per foreground saying what runs and how it was checked, then one row per foreground.
void print_compute_table(const ComputeReport& report, std::FILE* out);

/// The result file's content except "topology" and "environment", which write_result_file adds.
json::Value compute_to_json(const ComputeReport& report);

}  // namespace pickle::bench
