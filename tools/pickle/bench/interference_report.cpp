#include "interference_report.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "table_text.hpp"

namespace pickle::bench {
namespace {

json::Value optional_count(const std::optional<std::uint64_t>& value) {
  return value ? json::Value(*value) : json::Value();
}

std::optional<std::uint64_t> count_from(const json::Value& value) {
  if (value.is_null()) return std::nullopt;
  return static_cast<std::uint64_t>(value.as_int());
}

}  // namespace

double InterferenceRow::relative() const noexcept {
  return error.empty() && alone_ms() > 0 && with_ms > 0 ? alone_ms() / with_ms : 0;
}

bool InterferenceRow::passed() const noexcept {
  return error.empty() && row_passed(window.overlap, background_wrong.value_or(0), foreground_wrong.value_or(0));
}

int InterferenceReport::exit_code() const {
  for (const auto& fg : foregrounds) {
    if (foreground_fails_run(fg)) return 1;
  }
  for (const auto& run : traffic) {
    if (run.status == RunStatus::Failed) return 1;
  }
  for (const auto& row : rows) {
    if (!row.passed()) return 1;
  }
  return 0;
}

json::Value row_to_json(const InterferenceRow& row) {
  json::Value r = json::Value::object();
  r["foreground"] = row.foreground;
  r["background"] = row.background;
  r["backend"] = row.backend;
  r["bytes"] = row.bytes;
  const bool measured = row.error.empty();
  r["t_alone_ms"] = measured ? json::Value(row.alone_ms()) : json::Value();
  r["t_alone_before_ms"] = measured ? json::Value(row.alone_before_ms) : json::Value();
  r["t_alone_after_ms"] = measured ? json::Value(row.alone_after_ms) : json::Value();
  r["t_with_ms"] = measured ? json::Value(row.with_ms) : json::Value();
  r["relative"] = measured ? json::Value(row.relative()) : json::Value();
  r["background_gbps"] = measured ? json::Value(row.window.gbps) : json::Value();
  r["overlap"] = measured && row.window.overlap;
  json::Value window = json::Value::object();
  window["window_ms"] = row.window.window_ms;
  window["bytes_in_window"] = row.window.bytes_in_window;
  window["messages_in_window"] = row.window.completed_in_window;
  window["messages"] = row.window.messages;
  window["lead_ms"] = row.window.lead_ms;
  window["tail_ms"] = row.window.tail_ms;
  window["max_gap_ms"] = row.window.max_gap_ms;
  r["window"] = measured ? std::move(window) : json::Value();
  r["background_wrong"] = optional_count(row.background_wrong);
  r["foreground_wrong"] = optional_count(row.foreground_wrong);
  r["passed"] = row.passed();
  r["error"] = row.error.empty() ? json::Value() : json::Value(row.error);
  return r;
}

InterferenceRow row_from_json(const json::Value& value) {
  InterferenceRow row;
  row.foreground = value.at("foreground").as_string();
  row.background = value.at("background").as_string();
  row.backend = value.at("backend").as_string();
  row.bytes = static_cast<std::size_t>(value.at("bytes").as_int());
  if (!value.at("error").is_null()) row.error = value.at("error").as_string();
  if (row.error.empty()) {
    row.alone_before_ms = value.at("t_alone_before_ms").as_double();
    row.alone_after_ms = value.at("t_alone_after_ms").as_double();
    row.with_ms = value.at("t_with_ms").as_double();
    row.window.gbps = value.at("background_gbps").as_double();
    row.window.overlap = value.at("overlap").as_bool();
    const json::Value& w = value.at("window");
    row.window.window_ms = w.at("window_ms").as_double();
    row.window.bytes_in_window = w.at("bytes_in_window").as_double();
    row.window.completed_in_window = static_cast<std::uint64_t>(w.at("messages_in_window").as_int());
    row.window.messages = static_cast<std::uint64_t>(w.at("messages").as_int());
    row.window.lead_ms = w.at("lead_ms").as_double();
    row.window.tail_ms = w.at("tail_ms").as_double();
    row.window.max_gap_ms = w.at("max_gap_ms").as_double();
  }
  row.background_wrong = count_from(value.at("background_wrong"));
  row.foreground_wrong = count_from(value.at("foreground_wrong"));
  return row;
}

void print_interference_table(const InterferenceReport& report, std::FILE* out) {
  const auto& o = report.options;
  if (!report.waived.empty()) {
    std::fprintf(out, "interference: waived: %s\n", report.waived.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "# pickle bench interference: rank 0 -> rank 1 of %d, foreground on rank 1's GPU, %d iterations "
                    "after %d warm-up (at least %d ms), %d messages in flight\n",
               report.world_size, o.iterations, o.warmup, o.warmup_ms, o.depth);
  for (const auto& fg : report.foregrounds) {
    std::fprintf(out, "%s\n", foreground_line(fg).c_str());
  }
  for (const auto& run : report.traffic) {
    std::fprintf(out, "# %s %s %s%s%s\n", pad_right(run.background, 9).c_str(), pad_right(run.backend, 6).c_str(),
                 run_status_name(run.status), run.detail.empty() ? "" : ": ", run.detail.c_str());
  }
  for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
  std::fprintf(out, "# t_alone, t_with: ms per foreground iteration (CUDA events around -n iterations); t_alone is the "
                    "mean of a measurement before the background started and one after it stopped\n");
  std::fprintf(out, "# relative = t_alone / t_with (1: the traffic costs nothing)\n");
  std::fprintf(out, "# bg(GB/s): background bandwidth inside the timed window; overlap: the background was moving "
                    "data before the window opened and after it closed (a 'NO' fails the run)\n");
  std::fprintf(out, "# #wrong: background bytes that differ + foreground output elements that differ from its "
                    "first run (N/A with -c 0)\n");
  std::fprintf(out, "#%s%s%s%s%s%s%s%s%s%s\n", pad_left("foreground", 10).c_str(), pad_left("traffic", 10).c_str(),
               pad_left("backend", 8).c_str(), pad_left("size", 13).c_str(), pad_left("t_alone(ms)", 12).c_str(),
               pad_left("t_with(ms)", 11).c_str(), pad_left("relative", 9).c_str(), pad_left("bg(GB/s)", 10).c_str(),
               pad_left("overlap", 8).c_str(), pad_left("#wrong", 8).c_str());
  for (const auto& row : report.rows) {
    std::string line = " ";  // then appended: GCC 12 at -O3 warns falsely (-Wrestrict) on "#" + f()
    line += pad_left(row.foreground, 10) + pad_left(row.background, 10) + pad_left(row.backend, 8) +
                       pad_left(cat(row.bytes), 13);
    if (!row.error.empty()) {
      line += pad_left("FAILED", 12) + pad_left("-", 11) + pad_left("-", 9) + pad_left("-", 10) + pad_left("-", 8) +
              pad_left("-", 8);
    } else {
      std::string wrong = "N/A";
      if (row.background_wrong || row.foreground_wrong) {
        wrong = cat(row.background_wrong.value_or(0) + row.foreground_wrong.value_or(0));
      }
      line += pad_left(fixed(row.alone_ms(), 3), 12) + pad_left(fixed(row.with_ms, 3), 11) +
              pad_left(fixed(row.relative(), 3), 9) +
              pad_left(fixed(row.window.gbps, row.window.gbps < 10 ? 3 : 1), 10) +
              pad_left(row.window.overlap ? "yes" : "NO", 8) + pad_left(wrong, 8);
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
  for (const auto& row : report.rows) {
    if (!row.error.empty()) {
      std::fprintf(out, "# FAILED: %s %s %s %s: %s\n", row.foreground.c_str(), row.background.c_str(),
                   row.backend.c_str(), short_size(row.bytes).c_str(), row.error.c_str());
    }
  }
  std::fflush(out);
}

json::Value interference_to_json(const InterferenceReport& report) {
  const auto& o = report.options;
  json::Value root = result_head("interference", report.command, report.started_utc);
  json::Value options = sweep_options_json(o, report.sizes.empty() ? 0 : report.sizes.back(), "iterations");
  options["warmup_ms"] = o.warmup_ms;
  options["check"] = o.check;
  options["depth"] = o.depth;
  options["memory"] = "cuda";
  options["world_size"] = report.world_size;
  options["foregrounds"] = string_array(o.foregrounds);
  options["attention"] = attention_impl_name(o.attention);
  options["backends"] = string_array(o.backends);
  options["backgrounds"] = string_array(o.backgrounds);
  root["options"] = std::move(options);
  root["waived"] = report.waived.empty() ? json::Value() : json::Value(report.waived);
  root["notes"] = string_array(report.notes);
  json::Value foregrounds = json::Value::array();
  for (const auto& fg : report.foregrounds) foregrounds.push_back(foreground_to_json(fg));
  root["foregrounds"] = std::move(foregrounds);
  json::Value traffic = json::Value::array();
  for (const auto& run : report.traffic) {
    json::Value t = json::Value::object();
    t["background"] = run.background;
    t["backend"] = run.backend;
    t["status"] = run_status_name(run.status);
    t["detail"] = run.detail;
    traffic.push_back(std::move(t));
  }
  root["traffic"] = std::move(traffic);
  json::Value results = json::Value::array();
  for (const auto& row : report.rows) results.push_back(row_to_json(row));
  root["results"] = std::move(results);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
