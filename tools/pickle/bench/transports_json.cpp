#include "transports_json.hpp"

#include <algorithm>

#include "result_file.hpp"

namespace pickle::bench {
namespace {

json::Value optional_number(std::optional<double> value) { return value ? json::Value(*value) : json::Value(); }

json::Value run_json(const RunResult& run) {
  json::Value r = json::Value::object();
  r["run"] = run.run;
  r["status"] = run_status_name(run.status);
  r["detail"] = run.detail;
  r["exit_code"] = run.exit_code;
  r["seconds"] = run.seconds;
  r["command"] = string_array(run.command);
  json::Value results = json::Value::array();
  for (const auto& [bytes, gbps] : run.gbps) {
    json::Value point = json::Value::object();
    point["bytes"] = bytes;
    point["gbps"] = gbps;
    results.push_back(std::move(point));
  }
  r["results"] = std::move(results);
  r["wrong"] = run.wrong;
  r["stderr_tail"] = run.stderr_tail;
  return r;
}

json::Value config_json(const OpSection& section, const ConfigRuns& c) {
  json::Value j = json::Value::object();
  j["key"] = c.config->key;
  j["name"] = c.config->name;
  j["backend"] = c.config->backend;
  json::Value env = json::Value::object();
  for (const auto& [name, value] : kCommonEnv) env[name] = value;
  for (const auto& [name, value] : c.config->set) env[name] = value;
  j["env"] = std::move(env);
  json::Value unset = json::Value::array();
  for (auto name : c.config->unset) unset.push_back(name);
  j["unset"] = std::move(unset);
  j["status"] = config_status_name(c.status());
  j["detail"] = c.detail();
  json::Value runs = json::Value::array();
  for (const auto& run : c.runs) runs.push_back(run_json(run));
  j["runs"] = std::move(runs);
  // The aggregate over the ok runs, per size: the mean the table shows, and the spread between runs.
  json::Value means = json::Value::array();
  for (std::size_t bytes : section.sizes()) {
    std::vector<double> values;
    for (const RunResult* run : c.ok_runs()) {
      if (auto it = run->gbps.find(bytes); it != run->gbps.end()) values.push_back(it->second);
    }
    if (values.empty()) continue;
    json::Value m = json::Value::object();
    m["bytes"] = bytes;
    m["mean"] = *c.mean(bytes);
    m["min"] = *std::min_element(values.begin(), values.end());
    m["max"] = *std::max_element(values.begin(), values.end());
    m["runs"] = values.size();
    means.push_back(std::move(m));
  }
  j["mean_gbps"] = std::move(means);
  return j;
}

json::Value section_json(const OpSection& section) {
  json::Value s = json::Value::object();
  s["op"] = op_name(section.op);
  s["metric"] = metric_name(section.op);
  s["status"] = section.skipped.empty() ? "ok" : "skipped";
  s["detail"] = section.skipped;
  auto largest = section.largest_common();
  s["largest_bytes"] = largest ? json::Value(*largest) : json::Value();
  json::Value configs = json::Value::array();
  for (const auto& c : section.configs) configs.push_back(config_json(section, c));
  s["configurations"] = std::move(configs);
  json::Value gains = json::Value::array();
  for (const auto& comparison : comparisons()) {
    if (section.configs.empty()) break;
    json::Value g = json::Value::object();
    g["fast"] = comparison.fast;
    g["slow"] = comparison.slow;
    g["label"] = comparison.label;
    g["largest"] = largest ? optional_number(section.gain(comparison, *largest)) : json::Value();
    json::Value per_size = json::Value::array();
    for (std::size_t bytes : section.sizes()) {
      json::Value p = json::Value::object();
      p["bytes"] = bytes;
      p["ratio"] = optional_number(section.gain(comparison, bytes));
      per_size.push_back(std::move(p));
    }
    g["per_size"] = std::move(per_size);
    gains.push_back(std::move(g));
  }
  s["gains"] = std::move(gains);
  return s;
}

}  // namespace

json::Value transports_to_json(const TransportsReport& report) {
  const auto& o = report.options;
  json::Value root = result_head("transports", report.command, report.started_utc);
  std::size_t largest = 0;
  for (const auto& section : report.ops) {
    auto sizes = section.sizes();
    if (!sizes.empty()) largest = std::max(largest, sizes.back());
  }
  json::Value options = sweep_options_json(o, largest != 0 ? largest : o.max_bytes, "iterations");
  options["runs"] = o.runs;
  json::Value ops = json::Value::array();
  for (TransportOp op : o.ops) ops.push_back(op_name(op));
  options["ops"] = std::move(ops);
  options["repeats"] = o.repeats > 0 ? json::Value(o.repeats) : json::Value();
  options["ranks"] = o.ranks > 0 ? json::Value(o.ranks) : json::Value();
  options["memory"] = report.memory.empty() ? json::Value() : json::Value(report.memory);
  options["world_size"] = report.world_size;
  root["options"] = std::move(options);
  root["notes"] = string_array(report.notes);
  json::Value sections = json::Value::array();
  for (const auto& section : report.ops) sections.push_back(section_json(section));
  root["operations"] = std::move(sections);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
