#include "transports_extract.hpp"

#include <optional>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/json.hpp"
#include "lockstep.hpp"
#include "topology/sysfs.hpp"
#include "sizes.hpp"

namespace pickle::bench {
namespace {

/// What the child's result file says about the measurement's backend.
struct FileFacts {
  std::string status;  // the backend's status in "backends" ("" when absent)
  std::string detail;
  std::map<std::size_t, double> gbps;
  std::uint64_t wrong = 0;
  std::vector<std::string> problems;  // failed steps, wrong bytes, a missing environment variable
  std::string memory;
  int world_size = 0;
};

/// The median of a {median, min, max} member, or nullopt when the member is null or absent.
std::optional<double> median_of(const json::Value& entry, std::string_view key) {
  const json::Value* value = entry.find(key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  return value->at("median").as_double();
}

bool is_this_measurement(const ChildMeasurement& what, const json::Value& entry) {
  if (entry.at("backend").as_string() != what.backend) return false;
  if (what.op == TransportOp::P2p) return entry.at("mode").as_string() == what.mode;
  // Allreduce: the out-of-place measurement of allreduce (the child runs nothing else, but say so).
  const json::Value* coll = entry.find("collective");
  if (coll != nullptr && coll->as_string() != "allreduce") return false;
  const json::Value* in_place = entry.find("in_place");
  return in_place == nullptr || !in_place->as_bool();
}

FileFacts read_facts(const ChildMeasurement& what, const json::Value& root) {
  FileFacts facts;
  if (const json::Value* options = root.find("options")) {
    if (const json::Value* memory = options->find("memory"); memory != nullptr && memory->is_string()) {
      facts.memory = memory->as_string();
    }
    if (const json::Value* world = options->find("world_size"); world != nullptr && world->is_int()) {
      facts.world_size = static_cast<int>(world->as_int());
    }
  }
  for (const auto& backend : root.at("backends").as_array()) {
    if (backend.at("name").as_string() != what.backend) continue;
    facts.status = backend.at("status").as_string();
    facts.detail = backend.at("detail").as_string();
  }
  const char* unit = what.op == TransportOp::P2p ? "byte" : "element";
  for (const auto& entry : root.at("results").as_array()) {
    if (!is_this_measurement(what, entry)) continue;
    auto bytes = static_cast<std::size_t>(entry.at("bytes").as_int());
    const json::Value* error = entry.find("error");
    if (error != nullptr && !error->is_null()) {
      facts.problems.push_back(cat("at ", short_size(bytes), ": ", error->as_string()));
      continue;
    }
    const json::Value* wrong = entry.find("wrong");
    if (wrong != nullptr && !wrong->is_null() && wrong->as_int() != 0) {
      facts.wrong += static_cast<std::uint64_t>(wrong->as_int());
      facts.problems.push_back(cat(wrong->as_int(), " wrong ", unit, wrong->as_int() == 1 ? "" : "s", " at ",
                                   short_size(bytes)));
    }
    // p2p: algbw = busbw (factor 1); allreduce: busbw, the number nccl-tests and seed 000 compare.
    auto gbps = median_of(entry, "busbw_gbps");
    if (gbps) facts.gbps[bytes] = *gbps;
  }
  for (auto& problem : unrecorded_environment(root, what.env)) facts.problems.push_back(std::move(problem));
  return facts;
}

std::string join_problems(const std::vector<std::string>& problems) {
  constexpr std::size_t kShown = 3;
  std::string text;
  for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) text += (i == 0 ? "" : "; ") + problems[i];
  if (problems.size() > kShown) text += cat("; and ", problems.size() - kShown, " more");
  return text;
}

}  // namespace

RunResult read_child_measurement(const ChildMeasurement& what, const ChildOutcome& outcome,
                                 const std::string& json_path, const std::string& stderr_path) {
  RunResult run;
  run.exit_code = outcome.exited ? outcome.exit_code : -1;
  run.seconds = outcome.seconds;
  // A shared child's exit code 1 is its verdict on all its backends together; this backend's record says its part.
  const bool ended_well = outcome.ok() || (what.shared && outcome.exited && !outcome.timed_out &&
                                           outcome.exit_code == 1);

  std::vector<std::string> problems;
  std::optional<FileFacts> facts;
  std::optional<std::string> text = topology::read_text_file(json_path);
  if (!text || text->empty()) {
    problems.push_back("it wrote no result file");
  } else {
    try {
      facts = read_facts(what, json::parse(*text));
    } catch (const Error& e) {
      problems.push_back(cat("its result file is unusable: ", plain_message(e)));
    }
  }
  if (facts) {
    run.gbps = facts->gbps;
    run.wrong = facts->wrong;
    run.detail = facts->detail;
    run.memory = facts->memory;
    run.world_size = facts->world_size;
    if (facts->status == "unavailable" && ended_well) {
      run.status = RunResult::Status::Unavailable;
      return run;
    }
    if (facts->status.empty()) problems.push_back(cat("its result file has no backend ", what.backend));
    if (facts->status == "failed") problems.push_back(cat(what.backend, " failed: ", facts->detail));
    problems.insert(problems.end(), facts->problems.begin(), facts->problems.end());
    if (facts->status == "ok" && facts->gbps.empty() && facts->problems.empty()) {
      problems.push_back("its result file holds no measurement");
    }
  }
  if (ended_well && problems.empty()) {
    run.status = RunResult::Status::Ok;
    return run;
  }
  run.status = RunResult::Status::Failed;
  run.detail = cat(what.who, outcome.describe(), problems.empty() ? "" : ": ", join_problems(problems));
  run.stderr_tail = file_tail(stderr_path, 15);
  return run;
}

RunResult read_child_run(TransportOp op, const Configuration& config, const ChildOutcome& outcome,
                         const std::string& json_path, const std::string& stderr_path) {
  ChildMeasurement what{.op = op,
                        .backend = config.backend,
                        .mode = "uni",
                        .env = config.set,
                        .who = cat("`pickle bench ", child_suite(op), " --backend ", config.backend, "` "),
                        .shared = false};
  return read_child_measurement(what, outcome, json_path, stderr_path);
}

}  // namespace pickle::bench
