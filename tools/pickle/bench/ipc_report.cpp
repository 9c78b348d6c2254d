#include "ipc_report.hpp"

#include "core/format.hpp"
#include "result_file.hpp"
#include "p2p_report.hpp"
#include "table_text.hpp"

namespace pickle::bench {

const char* ipc_status_name(IpcRow::Status status) noexcept {
  switch (status) {
    case IpcRow::Status::Ok: return "ok";
    case IpcRow::Status::Unavailable: return "unavailable";
    case IpcRow::Status::Failed: return "failed";
  }
  return "?";
}

int IpcReport::exit_code() const {
  for (const auto& row : rows) {
    if (row.status == IpcRow::Status::Failed || row.wrong.value_or(0) > 0) return 1;
  }
  if (!cache.ran || !cache.error.empty() || cache.wrong > 0 || cache.steady_opens > 0) return 1;
  return 0;
}

namespace {

std::string us_text(double us) { return fixed(us, us < 100 ? 2 : 1); }

/// `text` right-aligned in `width`, with at least one space before it: a value wider than its column must not run
/// into the one before (a 10-digit size and a 24-character time read as one number on 2026-11-30).
std::string column(const std::string& text, std::size_t width) { return " " + pad_left(text, width - 1); }

}  // namespace

void print_ipc_table(const IpcReport& report, std::FILE* out) {
  const auto& o = report.options;
  std::fprintf(out, "# pickle bench ipc: rank 1 exports, rank 0 imports; %s memory (%s); %d repeats after %d "
                    "warm-up\n",
               std::string(memory_kind_name(report.memory)).c_str(), report.plan_why.c_str(), o.iterations, o.warmup);
  std::fprintf(out, "# us per call, median [min..max] of the repeats; open = import (for vmm: import + map + set "
                    "access together), close = release, re-open = import again after the release\n");
  for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
  // kSize: up to 1 PiB in bytes, spaced; kCell: "99999.9 [99999.9..99999.9]" and a space (a 1 GiB cudaIpc open takes
  // about 9.5 ms, and its slowest repeat may pass 10 ms). A cell wider still keeps one space before it (column()).
  constexpr std::size_t kMethod = 11, kSize = 16, kCell = 27, kWrong = 8;
  std::string header = "#";  // then appended: GCC 12 at -O3 warns falsely (-Wrestrict) on "#" + f()
  header += pad_left("method", kMethod - 1) + pad_left("size", kSize) + pad_left("open(us)", kCell) +
                       pad_left("close(us)", kCell) + pad_left("re-open(us)", kCell) + pad_left("#wrong", kWrong);
  std::fprintf(out, "%s\n", header.c_str());
  auto cell = [&](const std::vector<double>& samples) {
    Summary s = summarize(samples);
    return column(cat(us_text(s.median), " [", us_text(s.min), "..", us_text(s.max), "]"), kCell);
  };
  for (const auto& row : report.rows) {
    std::string line = pad_left(row.method, kMethod) + column(cat(row.bytes), kSize);
    if (row.status == IpcRow::Status::Ok) {
      line += cell(row.open_us) + cell(row.close_us) + cell(row.reopen_us) +
              pad_left(row.wrong ? cat(*row.wrong) : std::string("-"), kWrong);
    } else {
      line += pad_left(row.status == IpcRow::Status::Unavailable ? "n/a" : "FAILED", kCell) + pad_left("-", kCell) +
              pad_left("-", kCell) + pad_left("-", kWrong);
    }
    std::fprintf(out, "%s\n", line.c_str());
    if (!row.detail.empty()) std::fprintf(out, "# %s %s: %s\n", row.method.c_str(), ipc_status_name(row.status), row.detail.c_str());
  }

  const auto& c = report.cache;
  // The allocation's method is known once the measurement has allocated (not when a stopped rank cut it short).
  std::fprintf(out, "#\n# pickle's mapping cache: Communicator send/recv of %zu bytes into one %sallocation "
                    "(receiver's recv-to-completion time)\n",
               c.bytes, c.method.empty() ? "" : (c.method + " ").c_str());
  std::fprintf(out, "#%s%s%s%s\n", pad_left("transfer", 15).c_str(), pad_left("time(us)", kCell).c_str(),
               pad_left("ipc_opens", 11).c_str(), pad_left("#wrong", kWrong).c_str());
  if (!c.ran || !c.error.empty()) {
    std::fprintf(out, "# cache measurement failed: %s\n", c.error.empty() ? "did not run" : c.error.c_str());
  } else {
    std::fprintf(out, "%s%s%s%s\n", pad_left("cache first", 16).c_str(), pad_left(us_text(c.first_us), kCell).c_str(),
                 pad_left(cat(c.first_opens), 11).c_str(), pad_left(cat(c.wrong), kWrong).c_str());
    std::fprintf(out, "%s%s%s%s\n", pad_left("cache steady", 16).c_str(), cell(c.steady_us).c_str(),
                 pad_left(cat(c.steady_opens), 11).c_str(), pad_left(cat(c.wrong), kWrong).c_str());
  }
  std::fflush(out);
}

json::Value ipc_to_json(const IpcReport& report) {
  json::Value root = result_head("ipc", report.command, report.started_utc);
  std::size_t largest = 0;
  for (const auto& row : report.rows) largest = std::max(largest, row.bytes);
  json::Value options = sweep_options_json(report.options, largest, "repeats");
  options["memory"] = std::string(memory_kind_name(report.memory));
  options["world_size"] = report.world_size;
  root["options"] = std::move(options);
  root["notes"] = string_array(report.notes);
  root["gpus_shared"] = report.gpus_shared;
  json::Value results = json::Value::array();
  for (const auto& row : report.rows) {
    json::Value r = json::Value::object();
    r["method"] = row.method;
    r["bytes"] = row.bytes;
    r["status"] = ipc_status_name(row.status);
    r["open_us"] = samples_json(row.open_us);
    r["close_us"] = samples_json(row.close_us);
    r["reopen_us"] = samples_json(row.reopen_us);
    r["wrong"] = row.wrong ? json::Value(*row.wrong) : json::Value();
    r["detail"] = row.detail;
    results.push_back(std::move(r));
  }
  root["results"] = std::move(results);
  const auto& c = report.cache;
  json::Value cache = json::Value::object();
  cache["bytes"] = c.bytes;
  cache["method"] = c.method;
  cache["first_us"] = c.ran && c.error.empty() ? json::Value(c.first_us) : json::Value();
  cache["steady_us"] = samples_json(c.steady_us);
  // A cache step that never ran (the run ended before it) has no counts: null, not 0 (found by review: "0 wrong" read
  // as checked), and says so.
  cache["ran"] = c.ran;
  cache["first_ipc_opens"] = c.ran ? json::Value(c.first_opens) : json::Value();
  cache["steady_ipc_opens"] = c.ran ? json::Value(c.steady_opens) : json::Value();
  cache["wrong"] = c.ran ? json::Value(c.wrong) : json::Value();
  cache["error"] = !c.error.empty() ? json::Value(c.error) : c.ran ? json::Value() : json::Value("did not run");
  root["cache"] = std::move(cache);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
