#include "p2p_report.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "core/format.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "table_text.hpp"

namespace pickle::bench {

const char* status_name(BackendRun::Status status) noexcept {
  switch (status) {
    case BackendRun::Status::Ok: return "ok";
    case BackendRun::Status::Unavailable: return "unavailable";
    case BackendRun::Status::Failed: return "failed";
  }
  return "?";
}

void print_backends_and_notes(const std::vector<BackendRun>& backends, const std::vector<std::string>& notes,
                              std::FILE* out) {
  for (const auto& run : backends) {
    std::fprintf(out, "# %-7s %s%s%s\n", run.name.c_str(), status_name(run.status), run.detail.empty() ? "" : ": ",
                 run.detail.c_str());
  }
  for (const auto& note : notes) std::fprintf(out, "# note: %s\n", note.c_str());
}

void WrongData::add(std::uint64_t count, std::string row) {
  if (count == 0) return;
  wrong += count;
  rows.push_back(std::move(row));
}

void say_wrong_data(std::string_view suite, const WrongData& data, std::string_view unit, std::FILE* out) {
  if (data.wrong == 0) return;
  constexpr std::size_t kNamed = 4;
  std::string where;
  for (std::size_t i = 0; i < data.rows.size() && i < kNamed; ++i) where += cat(i == 0 ? "" : "; ", data.rows[i]);
  if (data.rows.size() > kNamed) where += cat("; and ", data.rows.size() - kNamed, " more");
  const std::string text = cat(data.wrong, " wrong ", unit, " in the data checks of ", data.rows.size(), " row",
                               data.rows.size() == 1 ? "" : "s", " (", where, "): the #wrong column says which");
  std::fprintf(out, "# FAILED: %s\n", text.c_str());
  std::fflush(out);
  std::fprintf(stderr, "pickle bench %.*s: FAILED: %s\n", static_cast<int>(suite.size()), suite.data(), text.c_str());
  std::fflush(stderr);
}

json::Value backends_json(const std::vector<BackendRun>& backends) {
  json::Value all = json::Value::array();
  for (const auto& run : backends) {
    json::Value b = json::Value::object();
    b["name"] = run.name;
    b["status"] = status_name(run.status);
    b["detail"] = run.detail;
    all.push_back(std::move(b));
  }
  return all;
}

json::Value summary_json(const Summary& s) {
  json::Value v = json::Value::object();
  v["median"] = s.median;
  v["min"] = s.min;
  v["max"] = s.max;
  return v;
}

json::Value samples_json(const std::vector<double>& samples) {
  if (samples.empty()) return json::Value();
  json::Value v = summary_json(summarize(samples));
  v["samples"] = number_array(samples);
  return v;
}

int P2pReport::exit_code() const {
  for (const auto& backend : backends) {
    if (backend.status == BackendRun::Status::Failed) return 1;
  }
  for (const auto& step : steps) {
    if (!step.error.empty() || (step.wrong && *step.wrong > 0)) return 1;
    // pickle's steady state maps nothing: an open per transfer (what the seed's first Pickle did) fails the run.
    if (step.mapping_opens && *step.mapping_opens > 0) return 1;
  }
  return 0;
}

double algbw_gbps(Mode mode, std::size_t bytes, double time_us) noexcept {
  if (time_us <= 0) return 0;
  double moved = static_cast<double>(bytes) * (mode == Mode::Bi ? 2.0 : 1.0);
  return moved / (time_us * 1e3);
}

namespace {

/// Time with enough digits to compare, not more (bandwidth: gbps_text).
std::string time_text(double us) { return fixed(us, us < 100 ? 2 : (us < 10000 ? 1 : 0)); }

struct Key {
  std::string backend;
  Mode mode;
  std::size_t bytes;
  auto operator<=>(const Key&) const = default;
};

constexpr std::size_t kTimeWidth = 10, kBwWidth = 12, kWrongWidth = 7, kRatioWidth = 12;

}  // namespace

void print_table(const P2pReport& report, std::FILE* out) {
  const auto& o = report.options;
  std::map<Key, const StepResult*> steps;
  for (const auto& step : report.steps) steps[{step.backend, step.mode, step.bytes}] = &step;
  std::map<std::string, const BackendRun*> runs;
  for (const auto& run : report.backends) runs[run.name] = &run;
  auto has = [&](std::string_view name) {
    return std::find(o.backends.begin(), o.backends.end(), name) != o.backends.end();
  };
  const bool ratio_nccl = has("pickle") && has("nccl"), ratio_ce = has("pickle") && has("ce");

  std::fprintf(out, "# pickle bench p2p: ranks 0 -> 1 of %d, %s memory, %d iterations x %d repeats after %d warm-up\n",
               report.world_size, std::string(memory_kind_name(report.memory)).c_str(), o.iterations, o.repeats,
               o.warmup);
  std::fprintf(out, "# time: us per message (lat: one-way, half a round trip), median of the repeats; algbw = busbw "
                    "for p2p, GB/s (bi: both directions summed)\n");
  print_backends_and_notes(report.backends, report.notes, out);
  // A point enqueued with the gate open timed its enqueue too (the stream's queue could not hold -n iterations
  // behind the gate): said here as the JSON's `gated` says it, since the times are not of the same method.
  const auto ungated = std::ranges::count_if(report.steps, [](const StepResult& step) {
    return !step.gated && step.error.empty();
  });
  if (ungated > 0) {
    std::fprintf(out, "# note: %lld point(s) enqueued with the gate open: the stream's queue cannot hold -n %d "
                      "iterations behind the gate, so their times include the enqueue (lower -n, or "
                      "PICKLE_HOST_STREAM_DEPTH on host memory)\n",
                 static_cast<long long>(ungated), o.iterations);
  }
  for (const auto& step : report.steps) {
    if (step.mapping_opens && *step.mapping_opens > 0) {
      std::fprintf(out, "# FAILED: %s %s %zu B: %llu peer allocations mapped during the timed repeats (must be 0)\n",
                   step.backend.c_str(), std::string(mode_name(step.mode)).c_str(), step.bytes,
                   static_cast<unsigned long long>(*step.mapping_opens));
    }
  }

  std::string group = "#";  // then appended: GCC 12 at -O3 warns falsely (-Wrestrict) on "#" + f()
  group += std::string(5 + 12, ' ');
  std::string header = "#";
  header += pad_left("mode", 5) + pad_left("size", 12);
  for (const auto& name : o.backends) {
    std::size_t width = kTimeWidth + kBwWidth + kWrongWidth;
    std::string title = " ";
    title += name + " ";
    std::size_t dashes = width > title.size() ? width - title.size() : 0;
    group += " " + std::string(dashes / 2, '-') + title + std::string(dashes - dashes / 2, '-');
    header += pad_left("time(us)", kTimeWidth) + pad_left("algbw(GB/s)", kBwWidth) + pad_left("#wrong", kWrongWidth);
  }
  if (ratio_nccl) header += pad_left("pickle/nccl", kRatioWidth);
  if (ratio_ce) header += pad_left("pickle/ce", kRatioWidth);
  std::fprintf(out, "%s\n%s\n", group.c_str(), header.c_str());

  for (Mode mode : o.modes) {
    for (std::size_t bytes : report.sizes) {
      std::string line = " ";
      line += pad_left(std::string(mode_name(mode)), 5) + pad_left(cat(bytes), 12);
      std::map<std::string, double> bandwidth;
      for (const auto& name : o.backends) {
        auto run = runs.find(name);
        auto step = steps.find({name, mode, bytes});
        std::string time = "-", bw = "-", wrong = "-";
        if (run != runs.end() && run->second->status == BackendRun::Status::Unavailable) {
          time = "n/a";
        } else if (step != steps.end() && !step->second->error.empty()) {
          time = "FAILED";
        } else if (step != steps.end() && !step->second->time_us.empty()) {
          double us = summarize(step->second->time_us).median;
          bandwidth[name] = algbw_gbps(mode, bytes, us);
          time = time_text(us);
          bw = gbps_text(bandwidth[name]);
          wrong = step->second->wrong ? cat(*step->second->wrong) : std::string("N/A");
        }
        line += pad_left(time, kTimeWidth) + pad_left(bw, kBwWidth) + pad_left(wrong, kWrongWidth);
      }
      auto ratio = [&](const char* other) {
        auto p = bandwidth.find("pickle"), q = bandwidth.find(other);
        if (p == bandwidth.end() || q == bandwidth.end() || q->second <= 0) return pad_left("-", kRatioWidth);
        return pad_left(fixed(p->second / q->second, 2), kRatioWidth);
      };
      if (ratio_nccl) line += ratio("nccl");
      if (ratio_ce) line += ratio("ce");
      std::fprintf(out, "%s\n", line.c_str());
    }
  }
  std::fflush(out);
}

json::Value to_json(const P2pReport& report) {
  const auto& o = report.options;
  json::Value root = result_head("p2p", report.command, report.started_utc);

  json::Value options = sweep_options_json(o, report.sizes.empty() ? 0 : report.sizes.back(), "iterations");
  options["repeats"] = o.repeats;
  options["check"] = o.check;
  options["memory"] = std::string(memory_kind_name(report.memory));
  options["world_size"] = report.world_size;
  json::Value modes = json::Value::array();
  for (Mode mode : o.modes) modes.push_back(std::string(mode_name(mode)));
  options["backends"] = string_array(o.backends);
  options["modes"] = std::move(modes);
  root["options"] = std::move(options);

  root["notes"] = string_array(report.notes);
  root["gpus_shared"] = report.gpus_shared;

  root["backends"] = backends_json(report.backends);

  json::Value results = json::Value::array();
  for (const auto& step : report.steps) {
    json::Value r = json::Value::object();
    r["backend"] = step.backend;
    r["mode"] = std::string(mode_name(step.mode));
    r["bytes"] = step.bytes;
    r["iterations"] = step.iterations;
    r["repeats"] = step.time_us.size();
    r["gated"] = step.gated;
    if (step.error.empty() && !step.time_us.empty()) {
      Summary t = summarize(step.time_us);
      r["time_us"] = samples_json(step.time_us);
      // The bandwidth of the median time is the median bandwidth; min and max swap with the times.
      json::Value bw = summary_json({algbw_gbps(step.mode, step.bytes, t.median),
                                     algbw_gbps(step.mode, step.bytes, t.max),
                                     algbw_gbps(step.mode, step.bytes, t.min)});
      r["algbw_gbps"] = bw;
      r["busbw_gbps"] = std::move(bw);  // busbw factor 1 for p2p (nccl-tests)
    } else {
      r["time_us"] = nullptr;
      r["algbw_gbps"] = nullptr;
      r["busbw_gbps"] = nullptr;
    }
    r["wrong"] = step.wrong ? json::Value(*step.wrong) : json::Value();
    r["mapping_opens_timed"] = step.mapping_opens ? json::Value(*step.mapping_opens) : json::Value();
    r["completion_lane_writes_timed"] =
        step.completion_lane_writes ? json::Value(*step.completion_lane_writes) : json::Value();
    r["error"] = step.error.empty() ? json::Value() : json::Value(step.error);
    results.push_back(std::move(r));
  }
  root["results"] = std::move(results);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
