#pragma once
// What a scenario run measured, per backend, and its two renderings: lines for people (stdout) and the result file
// (--json, schema "pickle-bench/1", suite "scenario", keys in docs/bench.md). Every rank builds the same report
// from the agreed payloads; rank 0 prints and writes it.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <pickle/memory.hpp>

#include "core/json.hpp"
#include "p2p_report.hpp"
#include "scenario_options.hpp"

namespace pickle::bench {

/// One backend's outcome of the scenario.
struct ScenarioRun {
  std::string backend;
  json::Value result = json::Value::object();  ///< the scenario's own keys (docs/bench.md)
  std::vector<std::string> lines;              ///< what the table shows, one line each
  std::optional<std::uint64_t> wrong;          ///< wrong elements or objects, summed over ranks; unset with -c 0
  std::string error;                           ///< set when the scenario failed on some rank
};

struct ScenarioReport {
  ScenarioOptions options;
  std::vector<std::string> command;
  std::string started_utc;
  MemoryKind memory = MemoryKind::Host;
  int world_size = 0;
  json::Value plan = json::Value::object();  ///< the sizes the scenario ran with (after capping)
  std::vector<std::string> notes;
  bool gpus_shared = false;  ///< two ranks ran on one GPU: a functional run, no link measured
  std::vector<BackendRun> backends;
  std::vector<ScenarioRun> runs;

  /// 0 when every backend that ran passed its checks; 1 otherwise.
  int exit_code() const;
};

void print_scenario(const ScenarioReport& report, std::FILE* out);

/// The result file's content except "topology" and "environment", which the caller adds.
json::Value scenario_to_json(const ScenarioReport& report);

}  // namespace pickle::bench
