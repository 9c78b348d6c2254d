#include "interference_report.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "table_text.hpp"

namespace pickle::bench {
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

namespace {

/// "3 / 1 GB/s" cells: 1 decimal from 10 GB/s up, 3 below, 2 significant digits below 0.1.
std::string gbps_cell(double gbps) { return gbps_text(gbps, 1); }

/// The head's line on who does what in each background that runs.
void print_roles(const InterferenceReport& report, std::FILE* out) {
  for (const auto& background : report.options.backgrounds) {
    if (background == "p2p") {
      std::fprintf(out, "# p2p: rank 0 -> rank 1; rank 1 runs the foreground\n");
    } else {
      const int n = report.allgather_ranks;
      std::fprintf(out, "# allgather: ranks 0..%d each contribute size/%d and gather the size (nccl-tests' convention); "
                        "every one of them runs the foreground\n",
                   n - 1, n);
    }
  }
}

/// One line of the table; `lanes`: with the lanes column.
std::string row_line(const InterferenceRow& row, bool lanes) {
  std::string line = " ";  // then appended: GCC 12 at -O3 warns falsely (-Wrestrict) on "#" + f()
  line += pad_left(row.foreground, 10) + pad_left(row.background, 10) + pad_left(row.backend, 8);
  if (lanes) line += pad_left(cat(row.lanes), 6);
  line += pad_left(cat(row.bytes), 13);
  if (!row.measured()) {
    return line + pad_left("-", 6) + pad_left("FAILED", 12) + pad_left("-", 11) + pad_left("-", 9) +
           pad_left("-", 14) + pad_left("-", 10) + pad_left("-", 8) + pad_left("-", 8);
  }
  std::string wrong = "N/A";
  const auto background_wrong = row.background_wrong(), foreground_wrong = row.foreground_wrong();
  if (background_wrong || foreground_wrong) wrong = cat(background_wrong.value_or(0) + foreground_wrong.value_or(0));
  const std::string spread =
      row.ranks.size() > 1 ? fixed(row.relative_min(), 3) + ".." + fixed(row.relative_max(), 3) : std::string("-");
  return line + pad_left(cat(row.ranks.size()), 6) + pad_left(fixed(row.alone_ms(), 3), 12) +
         pad_left(fixed(row.with_ms(), 3), 11) + pad_left(fixed(row.relative(), 3), 9) + pad_left(spread, 14) +
         pad_left(gbps_cell(row.gbps()), 10) + pad_left(row.overlap() ? "yes" : "NO", 8) + pad_left(wrong, 8);
}

/// "# per rank: attention allgather pickle 8589934592: r0 0.857 (85.1 GB/s, overlap), r1 ...": a multi-rank row's
/// figures rank by rank, so that a straggler is seen.
std::string per_rank_line(const InterferenceRow& row) {
  std::string line = cat("# per rank: ", row.foreground, " ", row.background, " ", row.backend, " ", row.bytes, ":");
  for (std::size_t i = 0; i < row.ranks.size(); ++i) {
    const RankMeasurement& r = row.ranks[i];
    line += cat(i == 0 ? " r" : ", r", r.rank, " ", fixed(r.relative(), 3), " (", gbps_cell(r.window.gbps), " GB/s",
                r.window.overlap ? "" : ", NO overlap", ")");
  }
  return line;
}

/// "# clock: gemm p2p pickle 1073741824: SM 1980 -> 1890 MHz (0.955), power 690 -> 700 W, power cap 100% -> 100%
/// of the readings": the foreground GPU's clock and power alone and with the traffic, when both were sampled. A
/// clock ratio close to the relative throughput says the traffic slowed the kernel through the power budget.
std::string telemetry_line(const InterferenceRow& row) {
  const auto alone = row.telemetry_alone(), with = row.telemetry_with();
  if (!alone || !with || alone->samples == 0 || with->samples == 0) return "";
  auto percent = [](double fraction) { return cat(fixed(fraction * 100, 0), "%"); };
  return cat("# clock: ", row.foreground, " ", row.background, " ", row.backend, " ", row.bytes, ": SM ",
             fixed(alone->sm_mhz, 0), " -> ", fixed(with->sm_mhz, 0), " MHz (",
             fixed(alone->sm_mhz > 0 ? with->sm_mhz / alone->sm_mhz : 0, 3), "), power ", fixed(alone->power_w, 0),
             " -> ", fixed(with->power_w, 0), " W, power cap ", percent(alone->power_capped), " -> ",
             percent(with->power_capped), " of the readings");
}

/// The first measuring rank's telemetry source ("NVML ..." or "not sampled: ..."); empty without measured rows.
std::string telemetry_source(const InterferenceReport& report) {
  for (const auto& row : report.rows) {
    for (const auto& rank : row.ranks) {
      if (!rank.telemetry_source.empty()) return rank.telemetry_source;
    }
  }
  return "";
}

}  // namespace

void print_interference_table(const InterferenceReport& report, std::FILE* out) {
  const auto& o = report.options;
  if (!report.waived.empty()) {
    std::fprintf(out, "interference: waived: %s\n", report.waived.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "# pickle bench interference: %d ranks, %d iterations after %d warm-up (at least %d ms), %d "
                    "messages in flight\n",
               report.world_size, o.iterations, o.warmup, o.warmup_ms, o.depth);
  print_roles(report, out);
  for (const auto& fg : report.foregrounds) {
    std::fprintf(out, "%s\n", foreground_line(fg).c_str());
  }
  const bool lanes = !o.lanes.empty();
  for (const auto& run : report.traffic) {
    const std::string where = lanes ? cat("lanes ", run.lanes, " ") : std::string();
    std::fprintf(out, "# %s %s %s%s%s%s\n", pad_right(run.background, 9).c_str(), pad_right(run.backend, 6).c_str(),
                 where.c_str(), run_status_name(run.status), run.detail.empty() ? "" : ": ", run.detail.c_str());
  }
  if (lanes) {
    std::fprintf(out, "# lanes: each (lanes, backend) ran as a child process set forced onto its library's network "
                      "path over %s: nccl Socket with that many socket threads, pickle net with that many lanes\n",
                 o.iface.c_str());
  }
  for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
  std::fprintf(out, "# t_alone, t_with: ms per foreground iteration (CUDA events around -n iterations); t_alone is the "
                    "mean of a measurement before the background started and one after it stopped\n");
  std::fprintf(out, "# relative = t_alone / t_with (1: the traffic costs nothing); ranks: the ranks that ran the "
                    "foreground; with several, relative is the mean of theirs (min..max beside it) and the times and "
                    "bg(GB/s) are means\n");
  std::fprintf(out, "# bg(GB/s): background bandwidth inside the timed window; overlap: the background was moving "
                    "data before the window opened and after it closed, on every rank (a 'NO' fails the run)\n");
  std::fprintf(out, "# #wrong: background bytes that differ + foreground output elements that differ from its "
                    "first run, summed over the ranks (N/A with -c 0)\n");
  std::fprintf(out, "#%s%s%s%s%s%s%s%s%s%s%s%s%s\n", pad_left("foreground", 10).c_str(),
               pad_left("traffic", 10).c_str(), pad_left("backend", 8).c_str(),
               lanes ? pad_left("lanes", 6).c_str() : "", pad_left("size", 13).c_str(),
               pad_left("ranks", 6).c_str(), pad_left("t_alone(ms)", 12).c_str(), pad_left("t_with(ms)", 11).c_str(),
               pad_left("relative", 9).c_str(), pad_left("min..max", 14).c_str(), pad_left("bg(GB/s)", 10).c_str(),
               pad_left("overlap", 8).c_str(), pad_left("#wrong", 8).c_str());
  for (const auto& row : report.rows) std::fprintf(out, "%s\n", row_line(row, lanes).c_str());
  for (const auto& row : report.rows) {
    if (row.measured() && row.ranks.size() > 1) std::fprintf(out, "%s\n", per_rank_line(row).c_str());
  }
  if (const std::string source = telemetry_source(report); !source.empty()) {
    std::fprintf(out, "# GPU telemetry of the foreground's GPU over each timed window (means over the readings and "
                      "the ranks; alone: both measurements alone): %s\n",
                 source.c_str());
  }
  for (const auto& row : report.rows) {
    if (const std::string line = telemetry_line(row); !line.empty()) std::fprintf(out, "%s\n", line.c_str());
  }
  for (const auto& row : report.rows) {
    if (!row.error.empty()) {
      const std::string where = lanes ? cat(" lanes ", row.lanes) : std::string();
      std::fprintf(out, "# FAILED: %s %s %s%s %s: %s\n", row.foreground.c_str(), row.background.c_str(),
                   row.backend.c_str(), where.c_str(), short_size(row.bytes).c_str(), row.error.c_str());
    }
  }
  std::fflush(out);
}

json::Value traffic_run_to_json(const TrafficRun& run) {
  json::Value t = json::Value::object();
  t["background"] = run.background;
  t["backend"] = run.backend;
  t["status"] = run_status_name(run.status);
  t["detail"] = run.detail;
  if (run.lanes > 0) {
    t["lanes"] = run.lanes;
    t["env"] = env_to_json(run.env);
  }
  return t;
}

TrafficRun traffic_run_from_json(const json::Value& value) {
  TrafficRun run;
  run.background = value.at("background").as_string();
  run.backend = value.at("backend").as_string();
  run.status = parse_run_status(value.at("status").as_string(), "interference traffic run");
  run.detail = value.at("detail").as_string();
  if (const json::Value* lanes = value.find("lanes")) run.lanes = static_cast<int>(lanes->as_int());
  if (const json::Value* env = value.find("env")) run.env = env_from_json(*env);
  return run;
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
  options["ranks"] = o.ranks;
  options["share_gpus"] = o.share_gpus;
  options["foregrounds"] = string_array(o.foregrounds);
  options["attention"] = attention_impl_name(o.attention);
  options["backends"] = string_array(o.backends);
  options["backgrounds"] = string_array(o.backgrounds);
  json::Value lanes = json::Value::array();
  for (int count : o.lanes) lanes.push_back(count);
  options["lanes"] = std::move(lanes);
  options["iface"] = o.lanes.empty() ? json::Value() : json::Value(o.iface);
  root["options"] = std::move(options);
  root["waived"] = report.waived.empty() ? json::Value() : json::Value(report.waived);
  root["allgather_ranks"] = report.allgather_ranks;
  root["gpus_shared"] = report.gpus_shared;
  root["notes"] = string_array(report.notes);
  json::Value foregrounds = json::Value::array();
  for (const auto& fg : report.foregrounds) foregrounds.push_back(foreground_to_json(fg));
  root["foregrounds"] = std::move(foregrounds);
  json::Value traffic = json::Value::array();
  for (const auto& run : report.traffic) traffic.push_back(traffic_run_to_json(run));
  root["traffic"] = std::move(traffic);
  json::Value results = json::Value::array();
  for (const auto& row : report.rows) results.push_back(row_to_json(row));
  root["results"] = std::move(results);
  root["exit_code"] = report.exit_code();
  return root;
}

namespace {

/// How bad a status is: the worse one wins when ranks disagree.
int severity(RunStatus status) noexcept {
  return status == RunStatus::Failed ? 2 : status == RunStatus::Unavailable ? 1 : 0;
}

}  // namespace

std::vector<ForegroundInfo> combine_foregrounds(const std::vector<std::string>& payloads) {
  std::vector<ForegroundInfo> combined;
  bool first = true;
  for (std::size_t rank = 0; rank < payloads.size(); ++rank) {
    if (payloads[rank].empty()) continue;
    const json::Value infos = json::parse(payloads[rank]);  // named: a range-for over a temporary's member dangles
    std::vector<ForegroundInfo> mine;
    for (const auto& info : infos.as_array()) mine.push_back(foreground_from_json(info));
    if (first) {
      combined = std::move(mine);
      first = false;
      continue;
    }
    if (mine.size() != combined.size()) {
      throw ProtocolError(cat("bench interference: rank ", rank, " set up ", mine.size(), " foregrounds, another rank ",
                              combined.size()));
    }
    for (std::size_t f = 0; f < mine.size(); ++f) {
      if (mine[f].name != combined[f].name) {
        throw ProtocolError(cat("bench interference: rank ", rank, "'s foreground ", f, " is ", mine[f].name,
                                ", another rank's ", combined[f].name));
      }
      if (severity(mine[f].status) > severity(combined[f].status)) {
        combined[f].status = mine[f].status;
        combined[f].detail = cat("rank ", rank, ": ", mine[f].detail);
      }
    }
  }
  return combined;
}

}  // namespace pickle::bench
