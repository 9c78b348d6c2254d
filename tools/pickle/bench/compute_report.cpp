#include "compute_report.hpp"

#include "core/format.hpp"
#include "result_file.hpp"
#include "sample_summary.hpp"
#include "table_text.hpp"

namespace pickle::bench {

double LoadedRepeats::median_ms() const { return summarize(ms).median; }
double LoadedRepeats::min_ms() const { return summarize(ms).min; }
double LoadedRepeats::max_ms() const { return summarize(ms).max; }

double ComputeResult::median_ms() const { return summarize(ms).median; }
double ComputeResult::min_ms() const { return summarize(ms).min; }
double ComputeResult::max_ms() const { return summarize(ms).max; }

double ComputeResult::relative() const {
  const double loaded_ms = loaded ? loaded->median_ms() : 0;
  return loaded_ms > 0 && median_ms() > 0 ? median_ms() / loaded_ms : 0;
}

double ComputeResult::tflops() const {
  const double median = median_ms();
  return median > 0 ? info.flops / (median * 1e-3) / 1e12 : 0;
}

bool ComputeResult::passed() const {
  return info.status == RunStatus::Ok && error.empty() && !ms.empty() && changed.value_or(0) == 0;
}

int ComputeReport::exit_code() const {
  for (const auto& result : results) {
    if (foreground_fails_run(result.info)) return 1;
    if (result.info.status == RunStatus::Ok && !result.passed()) return 1;
  }
  return 0;
}

namespace {

/// --copy-load: each foreground's median alone and with the copies, their ratio, the rate reached, and the clock.
void print_copy_load(const ComputeReport& report, std::FILE* out) {
  std::fprintf(out, "# copy load: %s GB/s asked, %s MiB device-to-device copies on a stream of their own beside a "
                    "second series of repeats (the repeats alone: half before, half after them)\n",
               fixed(report.options.copy_load_gbps, 1).c_str(), cat(kCopyLoadChunkBytes >> 20).c_str());
  std::fprintf(out, "#%s%s%s%s%s\n", pad_left("foreground", 10).c_str(), pad_left("ms alone", 12).c_str(),
               pad_left("ms loaded", 12).c_str(), pad_left("relative", 10).c_str(), pad_left("load(GB/s)", 12).c_str());
  for (const auto& result : report.results) {
    if (!result.loaded || result.loaded->ms.empty()) continue;
    const LoadedRepeats& l = *result.loaded;
    std::fprintf(out, " %s%s%s%s%s\n", pad_left(result.info.name, 10).c_str(),
                 pad_left(fixed(result.median_ms(), 3), 12).c_str(), pad_left(fixed(l.median_ms(), 3), 12).c_str(),
                 pad_left(fixed(result.relative(), 3), 10).c_str(), pad_left(fixed(l.copy_gbps, 1), 12).c_str());
  }
  for (const auto& result : report.results) {
    if (!result.loaded || !result.loaded->telemetry || !result.telemetry) continue;
    const TelemetrySummary &alone = *result.telemetry, &loaded = *result.loaded->telemetry;
    if (alone.samples == 0 || loaded.samples == 0) continue;
    std::fprintf(out, "# clock: %s alone -> loaded: SM %s -> %s MHz (%s), power %s -> %s W, power cap %s%% -> %s%%\n",
                 result.info.name.c_str(), fixed(alone.sm_mhz, 0).c_str(), fixed(loaded.sm_mhz, 0).c_str(),
                 fixed(alone.sm_mhz > 0 ? loaded.sm_mhz / alone.sm_mhz : 0, 3).c_str(), fixed(alone.power_w, 0).c_str(),
                 fixed(loaded.power_w, 0).c_str(), fixed(alone.power_capped * 100, 0).c_str(),
                 fixed(loaded.power_capped * 100, 0).c_str());
  }
}

}  // namespace

void print_compute_table(const ComputeReport& report, std::FILE* out) {
  const auto& o = report.options;
  if (!report.waived.empty()) {
    std::fprintf(out, "compute: waived: %s\n", report.waived.c_str());
    for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "# pickle bench compute: GPU %d (%s), each foreground alone, %d iterations x %d repeats after %d "
                    "warm-up (at least %d ms)\n",
               o.device, report.device_name.c_str(), o.iterations, o.repeats, o.warmup, o.warmup_ms);
  for (const auto& result : report.results) std::fprintf(out, "%s\n", foreground_line(result.info).c_str());
  for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
  std::fprintf(out, "# ms: per iteration (CUDA events around -n iterations), median of the repeats, min and max beside "
                    "it; TFLOP/s from the median\n");
  std::fprintf(out, "# changed: output elements that differ from the foreground's first result after all repeats "
                    "(must be 0)\n");
  std::fprintf(out, "#%s%s%s%s%s%s  %s\n", pad_left("foreground", 10).c_str(), pad_left("ms", 12).c_str(),
               pad_left("min", 10).c_str(), pad_left("max", 10).c_str(), pad_left("TFLOP/s", 9).c_str(),
               pad_left("changed", 9).c_str(), "kernel");
  for (const auto& result : report.results) {
    std::string line = " ";
    line += pad_left(result.info.name, 10);
    if (result.ms.empty()) {
      const std::string why = result.info.status != RunStatus::Ok ? run_status_name(result.info.status) : "FAILED";
      line += pad_left(why, 12) + pad_left("-", 10) + pad_left("-", 10) + pad_left("-", 9) + pad_left("-", 9);
    } else {
      line += pad_left(fixed(result.median_ms(), 3), 12) + pad_left(fixed(result.min_ms(), 3), 10) +
              pad_left(fixed(result.max_ms(), 3), 10) + pad_left(fixed(result.tflops(), 1), 9) +
              pad_left(result.changed ? cat(*result.changed) : std::string("N/A"), 9);
    }
    line += cat("  ", result.info.kernel);
    std::fprintf(out, "%s\n", line.c_str());
  }
  for (const auto& result : report.results) {
    if (!result.error.empty()) std::fprintf(out, "# FAILED: %s: %s\n", result.info.name.c_str(), result.error.c_str());
  }
  if (!report.telemetry_source.empty()) {
    std::fprintf(out, "# GPU telemetry over the timed repeats: %s\n", report.telemetry_source.c_str());
  }
  for (const auto& result : report.results) {
    if (!result.telemetry || result.telemetry->samples == 0) continue;
    const TelemetrySummary& t = *result.telemetry;
    std::fprintf(out, "# clock: %s: SM %s MHz, power %s W, power cap %s%% of %d readings\n", result.info.name.c_str(),
                 fixed(t.sm_mhz, 0).c_str(), fixed(t.power_w, 0).c_str(), fixed(t.power_capped * 100, 0).c_str(),
                 t.samples);
  }
  if (o.copy_load_gbps > 0) print_copy_load(report, out);
  std::fflush(out);
}

json::Value compute_to_json(const ComputeReport& report) {
  const auto& o = report.options;
  json::Value root = result_head("compute", report.command, report.started_utc);
  json::Value options = json::Value::object();
  options["iterations"] = o.iterations;
  options["warmup"] = o.warmup;
  options["repeats"] = o.repeats;
  options["warmup_ms"] = o.warmup_ms;
  options["device"] = o.device;
  options["foregrounds"] = string_array(o.foregrounds);
  options["attention"] = attention_impl_name(o.attention);
  options["copy_load_gbps"] = o.copy_load_gbps;
  root["options"] = std::move(options);
  root["waived"] = report.waived.empty() ? json::Value() : json::Value(report.waived);
  root["device_name"] = report.device_name.empty() ? json::Value() : json::Value(report.device_name);
  root["notes"] = string_array(report.notes);
  root["telemetry_source"] = report.telemetry_source;
  json::Value results = json::Value::array();
  for (const auto& result : report.results) {
    json::Value r = foreground_to_json(result.info);
    const bool measured = !result.ms.empty();
    r["ms"] = measured ? json::Value(result.median_ms()) : json::Value();
    r["min_ms"] = measured ? json::Value(result.min_ms()) : json::Value();
    r["max_ms"] = measured ? json::Value(result.max_ms()) : json::Value();
    r["samples_ms"] = number_array(result.ms);
    r["tflops"] = measured ? json::Value(result.tflops()) : json::Value();
    r["changed"] = result.changed ? json::Value(*result.changed) : json::Value();
    r["passed"] = result.passed();
    r["error"] = result.error.empty() ? json::Value() : json::Value(result.error);
    r["telemetry"] = result.telemetry ? telemetry_to_json(*result.telemetry) : json::Value();
    if (result.loaded && !result.loaded->ms.empty()) {
      const LoadedRepeats& l = *result.loaded;
      json::Value loaded = json::Value::object();
      loaded["ms"] = l.median_ms();
      loaded["min_ms"] = l.min_ms();
      loaded["max_ms"] = l.max_ms();
      loaded["samples_ms"] = number_array(l.ms);
      loaded["relative"] = result.relative();
      loaded["copy_gbps"] = l.copy_gbps;
      loaded["telemetry"] = l.telemetry ? telemetry_to_json(*l.telemetry) : json::Value();
      r["copy_load"] = std::move(loaded);
    } else {
      r["copy_load"] = json::Value();
    }
    results.push_back(std::move(r));
  }
  root["results"] = std::move(results);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
