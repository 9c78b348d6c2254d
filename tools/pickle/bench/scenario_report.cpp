#include "scenario_report.hpp"

#include "result_file.hpp"

namespace pickle::bench {

int ScenarioReport::exit_code() const {
  for (const auto& backend : backends) {
    if (backend.status == BackendRun::Status::Failed) return 1;
  }
  for (const auto& run : runs) {
    if (!run.error.empty() || (run.wrong && *run.wrong > 0)) return 1;
  }
  return 0;
}

void print_scenario(const ScenarioReport& report, std::FILE* out) {
  std::fprintf(out, "# pickle bench scenario %s: %d ranks, %s memory\n",
               std::string(scenario_name(report.options.scenario)).c_str(), report.world_size,
               std::string(memory_kind_name(report.memory)).c_str());
  print_backends_and_notes(report.backends, report.notes, out);
  for (const auto& run : report.runs) {
    std::fprintf(out, "#\n# backend %s\n", run.backend.c_str());
    for (const auto& line : run.lines) std::fprintf(out, "%s\n", line.c_str());
    if (!run.error.empty()) std::fprintf(out, "FAILED: %s\n", run.error.c_str());
    std::fprintf(out, "#wrong %s\n", run.wrong ? std::to_string(*run.wrong).c_str() : "N/A");
  }
  std::fflush(out);
}

json::Value scenario_to_json(const ScenarioReport& report) {
  const auto& o = report.options;
  json::Value root = result_head("scenario", report.command, report.started_utc);
  root["scenario"] = std::string(scenario_name(o.scenario));
  json::Value options = json::Value::object();
  options["iterations"] = o.iterations;
  options["warmup"] = o.warmup;
  options["check"] = o.check;
  options["memory"] = std::string(memory_kind_name(report.memory));
  options["world_size"] = report.world_size;
  options["backends"] = string_array(o.backends);
  for (const auto& [key, value] : report.plan.as_object()) options[key] = value;
  root["options"] = std::move(options);
  root["notes"] = string_array(report.notes);
  root["gpus_shared"] = report.gpus_shared;
  root["backends"] = backends_json(report.backends);
  json::Value results = json::Value::array();
  for (const auto& run : report.runs) {
    json::Value r = json::Value::object();
    r["backend"] = run.backend;
    for (const auto& [key, value] : run.result.as_object()) r[key] = value;
    r["wrong"] = run.wrong ? json::Value(*run.wrong) : json::Value();
    r["error"] = run.error.empty() ? json::Value() : json::Value(run.error);
    results.push_back(std::move(r));
  }
  root["results"] = std::move(results);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
