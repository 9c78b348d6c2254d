#include "memcpy_report.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <numeric>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "result_file.hpp"
#include "p2p_report.hpp"
#include "sizes.hpp"
#include "table_text.hpp"

namespace pickle::bench {

const char* const kMemcpyCsvHeader =
    "Chunk Size (Bytes), Async Without Overhead (ms), Async Without Overhead (GB/s), Sync Without Overhead (ms), "
    "Sync Without Overhead (GB/s), Sync With Overhead (ms), Sync With Overhead (GB/s)";

double MemcpyColumn::mean_ms() const {
  if (samples_ms.empty()) return 0;
  return std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(samples_ms.size());
}

std::uint64_t MemcpyRow::wrong() const {
  return async.wrong.value_or(0) + sync.wrong.value_or(0) + overhead.wrong.value_or(0);
}

int MemcpyReport::exit_code() const {
  for (const auto& row : rows) {
    if (!row.error.empty() || row.wrong() > 0) return 1;
  }
  return 0;
}

double memcpy_gbps(std::size_t bytes, double ms) noexcept {
  return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0;
}

std::string seed_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (unit < 4 && value >= 1024) {
    value /= 1024;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  return text;
}

namespace {

std::string number(double value) {  // the seed's CSV precision: six significant digits
  char text[64];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string ms_text(double ms) { return fixed(ms, ms < 1 ? 4 : (ms < 100 ? 3 : 1)); }
std::string bw_text(double gbps) { return gbps_text(gbps, 2, 4); }  // the seed's tables: four decimals below 10

json::Value column_json(const MemcpyColumn& column, std::size_t bytes) {
  if (!column.ran()) return json::Value();
  json::Value c = json::Value::object();
  Summary s = summarize(column.samples_ms);
  c["ms"] = column.mean_ms();
  c["gbps"] = memcpy_gbps(bytes, column.mean_ms());
  c["median_ms"] = s.median;
  c["min_ms"] = s.min;
  c["max_ms"] = s.max;
  c["samples_ms"] = number_array(column.samples_ms);
  c["wrong"] = column.wrong ? json::Value(*column.wrong) : json::Value();
  return c;
}

}  // namespace

void print_memcpy_table(const MemcpyReport& report, std::FILE* out) {
  const auto& o = report.options;
  std::fprintf(out, "# pickle bench memcpy: rank 0 copies into rank 1's %s buffer (%s, %s), %d copies per column "
                    "after %d warm-up\n",
               std::string(memory_kind_name(report.memory)).c_str(), report.method.c_str(), report.plan_why.c_str(),
               o.iterations, o.warmup);
  std::fprintf(out, "# ms per copy (mean); GB/s = 1e9 bytes/s; with overhead = import rank 1's buffer + copy + "
                    "synchronize + release, per copy\n");
  for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
  constexpr std::size_t kSize = 12, kMs = 11, kBw = 11, kWrong = 8;
  std::fprintf(out, "#%s %s %s %s\n", std::string(kSize - 1, ' ').c_str(),
               " ---- async w/o overhead ---", "  --- sync w/o overhead ---", "  --- sync with overhead ---");
  std::string header = "#";  // then appended: GCC 12 at -O3 warns falsely (-Wrestrict) on "#" + f()
  header += pad_left("size", kSize - 1);
  for (int i = 0; i < 3; ++i) header += pad_left("ms", kMs) + pad_left("GB/s", kBw);
  header += pad_left("#wrong", kWrong);
  std::fprintf(out, "%s\n", header.c_str());
  for (const auto& row : report.rows) {
    std::string line = pad_left(cat(row.bytes), kSize);
    for (const MemcpyColumn* column : {&row.async, &row.sync, &row.overhead}) {
      if (column->ran()) {
        line += pad_left(ms_text(column->mean_ms()), kMs) + pad_left(bw_text(memcpy_gbps(row.bytes, column->mean_ms())), kBw);
      } else {
        line += pad_left(row.error.empty() ? "-" : "FAILED", kMs) + pad_left("-", kBw);
      }
    }
    line += pad_left(cat(row.wrong()), kWrong);
    std::fprintf(out, "%s\n", line.c_str());
    if (!row.error.empty()) std::fprintf(out, "# %s failed: %s\n", short_size(row.bytes).c_str(), row.error.c_str());
  }
  std::fflush(out);
}

void write_memcpy_csv(const MemcpyReport& report, const std::string& path) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) throw SystemError(cat("cannot write the --csv file ", path), errno);
  file << kMemcpyCsvHeader << "\n";
  for (const auto& row : report.rows) {
    if (!row.error.empty()) continue;  // a size that failed has no numbers to put in the seed's shape
    file << seed_size(row.bytes);
    for (const MemcpyColumn* column : {&row.async, &row.sync, &row.overhead}) {
      // A column that never ran (a later size failed before its pass came) is "nan", never a measured-looking 0.
      if (!column->ran()) {
        file << ", nan, nan";
        continue;
      }
      double ms = column->mean_ms();
      file << ", " << number(ms) << ", " << number(memcpy_gbps(row.bytes, ms));
    }
    file << "\n";
  }
  file.close();
  if (!file) throw SystemError(cat("cannot write the --csv file ", path, " to its end"), errno);
}

json::Value memcpy_to_json(const MemcpyReport& report) {
  json::Value root = result_head("memcpy", report.command, report.started_utc);
  json::Value options =
      sweep_options_json(report.options, report.rows.empty() ? 0 : report.rows.back().bytes, "iterations");
  options["memory"] = std::string(memory_kind_name(report.memory));
  options["method"] = report.method;
  options["world_size"] = report.world_size;
  root["options"] = std::move(options);
  root["notes"] = string_array(report.notes);
  root["gpus_shared"] = report.gpus_shared;
  json::Value results = json::Value::array();
  for (const auto& row : report.rows) {
    json::Value r = json::Value::object();
    r["bytes"] = row.bytes;
    r["async"] = column_json(row.async, row.bytes);
    r["sync"] = column_json(row.sync, row.bytes);
    r["sync_overhead"] = column_json(row.overhead, row.bytes);
    r["wrong"] = row.wrong();
    r["error"] = row.error.empty() ? json::Value() : json::Value(row.error);
    results.push_back(std::move(r));
  }
  root["results"] = std::move(results);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
