#include "interference_row.hpp"

#include <algorithm>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {
namespace {

json::Value optional_count(const std::optional<std::uint64_t>& value) {
  return value ? json::Value(*value) : json::Value();
}

std::optional<std::uint64_t> count_from(const json::Value& value) {
  if (value.is_null()) return std::nullopt;
  return static_cast<std::uint64_t>(value.as_int());
}

/// The mean of `field` over the row's ranks (0 without ranks).
template <class Field>
double mean_over(const std::vector<RankMeasurement>& ranks, Field field) {
  if (ranks.empty()) return 0;
  double sum = 0;
  for (const auto& r : ranks) sum += field(r);
  return sum / static_cast<double>(ranks.size());
}

/// The sum of an optional count over the ranks; unset when any rank has none.
template <class Field>
std::optional<std::uint64_t> sum_over(const std::vector<RankMeasurement>& ranks, Field field) {
  if (ranks.empty()) return std::nullopt;
  std::uint64_t sum = 0;
  for (const auto& r : ranks) {
    const std::optional<std::uint64_t> value = field(r);
    if (!value) return std::nullopt;
    sum += *value;
  }
  return sum;
}

json::Value window_to_json(const WindowStats& w) {
  json::Value window = json::Value::object();
  window["window_ms"] = w.window_ms;
  window["bytes_in_window"] = w.bytes_in_window;
  window["messages_in_window"] = w.completed_in_window;
  window["messages"] = w.messages;
  window["lead_ms"] = w.lead_ms;
  window["tail_ms"] = w.tail_ms;
  window["max_gap_ms"] = w.max_gap_ms;
  return window;
}

WindowStats window_from_json(const json::Value& w, double gbps, bool overlap) {
  WindowStats stats;
  stats.gbps = gbps;
  stats.overlap = overlap;
  stats.window_ms = w.at("window_ms").as_double();
  stats.bytes_in_window = w.at("bytes_in_window").as_double();
  stats.completed_in_window = static_cast<std::uint64_t>(w.at("messages_in_window").as_int());
  stats.messages = static_cast<std::uint64_t>(w.at("messages").as_int());
  stats.lead_ms = w.at("lead_ms").as_double();
  stats.tail_ms = w.at("tail_ms").as_double();
  stats.max_gap_ms = w.at("max_gap_ms").as_double();
  return stats;
}

/// `field` of every rank merged (merge()); unset when a rank has none.
template <class Field>
std::optional<TelemetrySummary> merge_over(const std::vector<RankMeasurement>& ranks, Field field) {
  if (ranks.empty()) return std::nullopt;
  TelemetrySummary all;
  for (const auto& r : ranks) {
    const std::optional<TelemetrySummary> value = field(r);
    if (!value) return std::nullopt;
    all = merge(all, *value);
  }
  return all;
}

json::Value optional_telemetry(const std::optional<TelemetrySummary>& value) {
  return value ? telemetry_to_json(*value) : json::Value();
}

std::optional<TelemetrySummary> telemetry_from(const json::Value* value) {
  if (value == nullptr || value->is_null()) return std::nullopt;
  return telemetry_from_json(*value);
}

}  // namespace

std::optional<TelemetrySummary> RankMeasurement::telemetry_alone() const {
  if (!telemetry_alone_before || !telemetry_alone_after) return std::nullopt;
  return merge(*telemetry_alone_before, *telemetry_alone_after);
}

double RankMeasurement::relative() const noexcept {
  return alone_ms() > 0 && with_ms > 0 ? alone_ms() / with_ms : 0;
}

bool RankMeasurement::passed() const noexcept {
  return row_passed(window.overlap, background_wrong.value_or(0), foreground_wrong.value_or(0));
}

double InterferenceRow::relative() const noexcept {
  return measured() ? mean_over(ranks, [](const RankMeasurement& r) { return r.relative(); }) : 0;
}

double InterferenceRow::relative_min() const noexcept {
  if (!measured()) return 0;
  double low = ranks.front().relative();
  for (const auto& r : ranks) low = std::min(low, r.relative());
  return low;
}

double InterferenceRow::relative_max() const noexcept {
  if (!measured()) return 0;
  double high = ranks.front().relative();
  for (const auto& r : ranks) high = std::max(high, r.relative());
  return high;
}

double InterferenceRow::alone_ms() const noexcept {
  return mean_over(ranks, [](const RankMeasurement& r) { return r.alone_ms(); });
}

double InterferenceRow::alone_before_ms() const noexcept {
  return mean_over(ranks, [](const RankMeasurement& r) { return r.alone_before_ms; });
}

double InterferenceRow::alone_after_ms() const noexcept {
  return mean_over(ranks, [](const RankMeasurement& r) { return r.alone_after_ms; });
}

double InterferenceRow::with_ms() const noexcept {
  return mean_over(ranks, [](const RankMeasurement& r) { return r.with_ms; });
}

double InterferenceRow::gbps() const noexcept {
  return mean_over(ranks, [](const RankMeasurement& r) { return r.window.gbps; });
}

std::optional<TelemetrySummary> InterferenceRow::telemetry_alone() const {
  return merge_over(ranks, [](const RankMeasurement& r) { return r.telemetry_alone(); });
}

std::optional<TelemetrySummary> InterferenceRow::telemetry_with() const {
  return merge_over(ranks, [](const RankMeasurement& r) { return r.telemetry_with; });
}

bool InterferenceRow::overlap() const noexcept {
  return measured() && std::all_of(ranks.begin(), ranks.end(), [](const RankMeasurement& r) {
           return r.window.overlap;
         });
}

const RankMeasurement& InterferenceRow::weakest() const {
  if (ranks.empty()) throw InvalidArgument("interference row: no rank measured it");
  return *std::min_element(ranks.begin(), ranks.end(), [](const RankMeasurement& a, const RankMeasurement& b) {
    return std::min(a.window.lead_ms, a.window.tail_ms) < std::min(b.window.lead_ms, b.window.tail_ms);
  });
}

std::optional<std::uint64_t> InterferenceRow::background_wrong() const {
  return sum_over(ranks, [](const RankMeasurement& r) { return r.background_wrong; });
}

std::optional<std::uint64_t> InterferenceRow::foreground_wrong() const {
  return sum_over(ranks, [](const RankMeasurement& r) { return r.foreground_wrong; });
}

bool InterferenceRow::passed() const noexcept {
  return measured() && std::all_of(ranks.begin(), ranks.end(), [](const RankMeasurement& r) { return r.passed(); });
}

json::Value rank_to_json(const RankMeasurement& rank) {
  json::Value r = json::Value::object();
  r["rank"] = rank.rank;
  r["t_alone_ms"] = rank.alone_ms();
  r["t_alone_before_ms"] = rank.alone_before_ms;
  r["t_alone_after_ms"] = rank.alone_after_ms;
  r["t_with_ms"] = rank.with_ms;
  r["relative"] = rank.relative();
  r["background_gbps"] = rank.window.gbps;
  r["overlap"] = rank.window.overlap;
  r["window"] = window_to_json(rank.window);
  r["background_wrong"] = optional_count(rank.background_wrong);
  r["foreground_wrong"] = optional_count(rank.foreground_wrong);
  json::Value telemetry = json::Value::object();
  telemetry["source"] = rank.telemetry_source;
  telemetry["alone_before"] = optional_telemetry(rank.telemetry_alone_before);
  telemetry["with"] = optional_telemetry(rank.telemetry_with);
  telemetry["alone_after"] = optional_telemetry(rank.telemetry_alone_after);
  r["telemetry"] = std::move(telemetry);
  return r;
}

RankMeasurement rank_from_json(const json::Value& value) {
  RankMeasurement rank;
  rank.rank = static_cast<int>(value.at("rank").as_int());
  rank.alone_before_ms = value.at("t_alone_before_ms").as_double();
  rank.alone_after_ms = value.at("t_alone_after_ms").as_double();
  rank.with_ms = value.at("t_with_ms").as_double();
  rank.window = window_from_json(value.at("window"), value.at("background_gbps").as_double(),
                                 value.at("overlap").as_bool());
  rank.background_wrong = count_from(value.at("background_wrong"));
  rank.foreground_wrong = count_from(value.at("foreground_wrong"));
  // Result files written before the telemetry have no "telemetry".
  if (const json::Value* telemetry = value.find("telemetry")) {
    rank.telemetry_source = telemetry->at("source").as_string();
    rank.telemetry_alone_before = telemetry_from(telemetry->find("alone_before"));
    rank.telemetry_with = telemetry_from(telemetry->find("with"));
    rank.telemetry_alone_after = telemetry_from(telemetry->find("alone_after"));
  }
  return rank;
}

json::Value env_to_json(const EnvList& env) {
  json::Value out = json::Value::object();
  for (const auto& [name, value] : env) out[name] = value;
  return out;
}

EnvList env_from_json(const json::Value& value) {
  EnvList env;
  for (const auto& member : value.as_object()) {
    if (!member.value.is_string()) throw ProtocolError(cat("interference row: env ", member.key, " is not a string"));
    env.emplace_back(member.key, member.value.as_string());
  }
  return env;
}

json::Value row_to_json(const InterferenceRow& row) {
  json::Value r = json::Value::object();
  r["foreground"] = row.foreground;
  r["background"] = row.background;
  r["backend"] = row.backend;
  r["bytes"] = row.bytes;
  const bool measured = row.measured();
  auto figure = [&](double value) { return measured ? json::Value(value) : json::Value(); };
  r["ranks"] = row.ranks.size();
  r["t_alone_ms"] = figure(row.alone_ms());
  r["t_alone_before_ms"] = figure(row.alone_before_ms());
  r["t_alone_after_ms"] = figure(row.alone_after_ms());
  r["t_with_ms"] = figure(row.with_ms());
  r["relative"] = figure(row.relative());
  r["relative_min"] = figure(row.relative_min());
  r["relative_max"] = figure(row.relative_max());
  r["background_gbps"] = figure(row.gbps());
  r["overlap"] = row.overlap();
  if (measured) {
    json::Value window = window_to_json(row.weakest().window);
    window["rank"] = row.weakest().rank;
    r["window"] = std::move(window);
  } else {
    r["window"] = json::Value();
  }
  r["background_wrong"] = optional_count(row.background_wrong());
  r["foreground_wrong"] = optional_count(row.foreground_wrong());
  // The clock beside the times: a relative throughput below 1 that the SM clock's ratio matches is the power budget,
  // not the memory or the links (gpu_telemetry.hpp).
  r["telemetry_alone"] = optional_telemetry(row.telemetry_alone());
  r["telemetry_with"] = optional_telemetry(row.telemetry_with());
  json::Value per_rank = json::Value::array();
  for (const auto& rank : row.ranks) per_rank.push_back(rank_to_json(rank));
  r["per_rank"] = std::move(per_rank);
  r["passed"] = row.passed();
  r["error"] = row.error.empty() ? json::Value() : json::Value(row.error);
  if (row.lanes > 0) {
    r["lanes"] = row.lanes;
    r["env"] = env_to_json(row.env);
  }
  return r;
}

InterferenceRow row_from_json(const json::Value& value) {
  InterferenceRow row;
  row.foreground = value.at("foreground").as_string();
  row.background = value.at("background").as_string();
  row.backend = value.at("backend").as_string();
  row.bytes = static_cast<std::size_t>(value.at("bytes").as_int());
  if (!value.at("error").is_null()) row.error = value.at("error").as_string();
  for (const auto& rank : value.at("per_rank").as_array()) row.ranks.push_back(rank_from_json(rank));
  if (const json::Value* lanes = value.find("lanes")) row.lanes = static_cast<int>(lanes->as_int());
  if (const json::Value* env = value.find("env")) row.env = env_from_json(*env);
  return row;
}

}  // namespace pickle::bench
