#include "coll_report.hpp"

#include <algorithm>
#include <string_view>

#include "core/format.hpp"
#include "result_file.hpp"
#include "table_text.hpp"

namespace pickle::bench {

int CollReport::exit_code() const {
  for (const auto& backend : backends) {
    if (backend.status == BackendRun::Status::Failed) return 1;
  }
  for (const auto& result : results) {
    if (!result.error.empty() || (result.wrong && *result.wrong > 0)) return 1;
  }
  return 0;
}

double coll_algbw_gbps(std::size_t bytes, double time_us) noexcept {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0;
}

double coll_median_busbw_gbps(const CollResult& result, int nranks) {
  return coll_algbw_gbps(result.point.shape.bytes, summarize(result.time_us).median) *
         busbw_factor(result.point.coll, nranks);
}

const char* op_column(const CollPoint& point) noexcept {
  return is_reduction(point.coll) ? reduce_op_name(point.op) : "none";
}

int root_column(const CollPoint& point) noexcept { return has_root(point.coll) ? point.root : -1; }

namespace {

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? " " + text : std::string(width - text.size(), ' ') + text;
}

std::string time_text(double us) { return fixed(us, us < 1000 ? 2 : 1); }

constexpr std::size_t kSize = 12, kCount = 14, kType = 10, kOp = 7, kRoot = 6, kTime = 10, kBw = 9, kWrong = 8;

/// The four cells of one placement.
std::string placement_cells(const CollResult* result, bool check, int nranks) {
  std::string time = "-", algbw = "-", busbw = "-", wrong = "-";
  if (result == nullptr) {
    // not run: the backend failed at an earlier point
  } else if (!result->unsupported.empty()) {
    time = "n/a";
  } else if (!result->error.empty()) {
    time = "FAILED";
  } else if (result->measured()) {
    double us = summarize(result->time_us).median;
    double alg = coll_algbw_gbps(result->point.shape.bytes, us);
    time = time_text(us);
    algbw = fixed(alg, 2);
    busbw = fixed(alg * busbw_factor(result->point.coll, nranks), 2);
    wrong = !check ? std::string("N/A") : result->wrong ? cat(*result->wrong) : std::string("-");
  }
  return pad(time, kTime) + pad(algbw, kBw) + pad(busbw, kBw) + pad(wrong, kWrong);
}

const CollResult* find_result(const CollReport& report, const std::string& backend, const CollPoint& point,
                              bool in_place) {
  for (const auto& r : report.results) {
    if (r.backend == backend && r.in_place == in_place && r.point.coll == point.coll && r.point.type == point.type &&
        r.point.op == point.op && r.point.shape.bytes == point.shape.bytes) {
      return &r;
    }
  }
  return nullptr;
}

/// nccl-tests' average: the mean busbw over every measured size and placement of one backend and collective.
std::optional<double> average_busbw(const CollReport& report, const std::string& backend, Collective coll) {
  double sum = 0;
  int count = 0;
  for (const auto& r : report.results) {
    if (r.backend != backend || r.point.coll != coll || !r.measured()) continue;
    sum += coll_median_busbw_gbps(r, report.world_size);
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / count;
}

void print_block(const CollReport& report, const BackendRun& run, Collective coll, std::FILE* out) {
  const std::string name(collective_name(coll));
  // An unavailable backend has no block: the header says why, once.
  if (run.status == BackendRun::Status::Unavailable) return;
  std::fprintf(out, "#\n# %s, backend %s%s\n", name.c_str(), run.name.c_str(),
               run.status == BackendRun::Status::Failed ? " (FAILED, see above)" : "");
  // "out-of-place" and "in-place" centred over their four columns, as nccl-tests does.
  constexpr std::size_t kBlock = kTime + kBw + kBw + kWrong;
  auto centred = [](const std::string& title, std::size_t width) {
    std::string dashes((width - title.size() - 2) / 2, '-');
    std::string text = dashes + " " + title + " " + dashes;
    return std::string(width - text.size(), ' ') + text;
  };
  std::string group = "#";  // then appended: GCC 12 at -O3 warns falsely (-Wrestrict) on "#" + f()
  group += std::string(kSize + kCount + kType + kOp + kRoot - 1, ' ') +
                      centred("out-of-place", kBlock) + centred("in-place", kBlock);
  auto columns = [](const char* a, const char* b, const char* c, const char* d) {
    return pad(a, kTime) + pad(b, kBw) + pad(c, kBw) + pad(d, kWrong);
  };
  std::string names = "#";
  names += pad("size", kSize - 1) + pad("count", kCount) + pad("type", kType) + pad("redop", kOp) +
                      pad("root", kRoot) + columns("time", "algbw", "busbw", "#wrong") +
                      columns("time", "algbw", "busbw", "#wrong");
  std::string units = "#";
  units += pad("(B)", kSize - 1) + pad("(elements)", kCount) + std::string(kType + kOp + kRoot, ' ') +
                      columns("(us)", "(GB/s)", "(GB/s)", "") + columns("(us)", "(GB/s)", "(GB/s)", "");
  units.erase(units.find_last_not_of(' ') + 1);
  std::fprintf(out, "%s\n%s\n%s\n", group.c_str(), names.c_str(), units.c_str());
  for (const auto& point : report.points) {
    if (point.coll != coll) continue;
    const std::size_t element = datatype_size(point.type);
    std::string line = pad(cat(point.shape.bytes), kSize) + pad(cat(point.shape.elements(element)), kCount) +
                       pad(datatype_name(point.type), kType) + pad(op_column(point), kOp) +
                       pad(cat(root_column(point)), kRoot);
    line += placement_cells(find_result(report, run.name, point, false), report.options.check, report.world_size);
    line += placement_cells(find_result(report, run.name, point, true), report.options.check, report.world_size);
    std::fprintf(out, "%s\n", line.c_str());
  }
  auto average = average_busbw(report, run.name, coll);
  std::fprintf(out, "# Avg bus bandwidth    : %s  (%s, %s)\n", average ? fixed(*average, 4).c_str() : "n/a",
               run.name.c_str(), name.c_str());
}

}  // namespace

void print_coll_table(const CollReport& report, std::FILE* out) {
  const auto& o = report.options;
  std::fprintf(out, "# pickle bench coll: %d ranks, %s memory, %d iterations x %d repeats after %d warm-up, check %s\n",
               report.world_size, std::string(memory_kind_name(report.memory)).c_str(), o.iterations, o.repeats,
               o.warmup, o.check ? "on" : "off");
  std::fprintf(out,
               "# time: us per call from the first enqueue to the end of the last call, median of the repeats, "
               "the slowest rank's; GB/s = 1e9 B/s; busbw = algbw x nccl-tests' factor\n");
  print_backends_and_notes(report.backends, report.notes, out);
  for (Collective coll : o.collectives) {
    for (const auto& run : report.backends) print_block(report, run, coll, out);
  }
  std::fflush(out);
}

json::Value coll_to_json(const CollReport& report) {
  const auto& o = report.options;
  json::Value root = result_head("coll", report.command, report.started_utc);

  std::size_t largest = 0;
  for (const auto& point : report.points) largest = std::max(largest, point.shape.bytes);
  json::Value options = sweep_options_json(o, largest, "iterations");
  options["repeats"] = o.repeats;
  options["check"] = o.check;
  options["memory"] = std::string(memory_kind_name(report.memory));
  options["world_size"] = report.world_size;
  options["backends"] = string_array(o.backends);
  json::Value collectives = json::Value::array(), types = json::Value::array(), ops = json::Value::array();
  for (Collective c : o.collectives) collectives.push_back(std::string(collective_name(c)));
  for (DataType t : o.dtypes) types.push_back(datatype_name(t));
  for (ReduceOp op : o.ops) ops.push_back(reduce_op_name(op));
  options["collectives"] = std::move(collectives);
  options["dtypes"] = std::move(types);
  options["ops"] = std::move(ops);
  options["root"] = o.root;
  options["timing"] = report.memory == MemoryKind::Cuda ? "cuda events from the first enqueue"
                                                        : "host clock around enqueue and synchronize";
  root["options"] = std::move(options);
  root["notes"] = string_array(report.notes);
  root["gpus_shared"] = report.gpus_shared;

  root["backends"] = backends_json(report.backends);

  json::Value results = json::Value::array();
  for (const auto& r : report.results) {
    const CollPoint& p = r.point;
    json::Value e = json::Value::object();
    e["backend"] = r.backend;
    e["collective"] = std::string(collective_name(p.coll));
    e["dtype"] = datatype_name(p.type);
    e["op"] = is_reduction(p.coll) ? json::Value(reduce_op_name(p.op)) : json::Value();
    e["root"] = has_root(p.coll) ? json::Value(p.root) : json::Value();
    e["in_place"] = r.in_place;
    e["bytes"] = p.shape.bytes;
    e["count"] = p.shape.elements(datatype_size(p.type));
    e["call_count"] = p.shape.count;
    e["iterations"] = r.iterations;
    e["repeats"] = r.time_us.size();
    if (r.measured()) {
      Summary t = summarize(r.time_us);
      e["time_us"] = samples_json(r.time_us);
      // The bandwidth of the median time is the median bandwidth; min and max swap with the times.
      const double factor = busbw_factor(p.coll, report.world_size);
      Summary alg{coll_algbw_gbps(p.shape.bytes, t.median), coll_algbw_gbps(p.shape.bytes, t.max),
                  coll_algbw_gbps(p.shape.bytes, t.min)};
      e["algbw_gbps"] = summary_json(alg);
      e["busbw_gbps"] = summary_json({alg.median * factor, alg.min * factor, alg.max * factor});
    } else {
      e["time_us"] = nullptr;
      e["algbw_gbps"] = nullptr;
      e["busbw_gbps"] = nullptr;
    }
    e["wrong"] = r.wrong ? json::Value(*r.wrong) : json::Value();
    e["local_copy_bytes_per_call"] =
        r.local_copy_bytes_per_call ? json::Value(*r.local_copy_bytes_per_call) : json::Value();
    e["unsupported"] = r.unsupported.empty() ? json::Value() : json::Value(r.unsupported);
    e["error"] = r.error.empty() ? json::Value() : json::Value(r.error);
    results.push_back(std::move(e));
  }
  root["results"] = std::move(results);

  json::Value averages = json::Value::array();
  for (Collective coll : o.collectives) {
    for (const auto& run : report.backends) {
      auto average = average_busbw(report, run.name, coll);
      if (!average) continue;
      json::Value a = json::Value::object();
      a["backend"] = run.name;
      a["collective"] = std::string(collective_name(coll));
      a["busbw_gbps"] = *average;
      averages.push_back(std::move(a));
    }
  }
  root["avg_busbw"] = std::move(averages);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
