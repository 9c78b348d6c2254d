#include "interference_lanes_merge.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/json.hpp"
#include "lockstep.hpp"
#include "topology/sysfs.hpp"

namespace pickle::bench {
namespace {

int severity(RunStatus status) noexcept {
  return status == RunStatus::Failed ? 2 : status == RunStatus::Unavailable ? 1 : 0;
}

/// The child's own verdict: exit code 1 with something in its file that explains it.
bool file_explains_failure(const InterferenceReport& part) { return part.exit_code() == 1; }

/// The child's result file as a report of its own (options aside), and what is wrong with it.
struct ChildFile {
  InterferenceReport part;
  std::optional<int> exit_code;  // as the file records it
  std::vector<std::string> problems;
};

void read_file_into(ChildFile& file, const LanesChild& child, const json::Value& root) {
  InterferenceReport& part = file.part;
  if (const json::Value* code = root.find("exit_code"); code != nullptr && code->is_int()) {
    file.exit_code = static_cast<int>(code->as_int());
  } else {
    file.problems.push_back("its result file records no exit code");
  }
  if (const json::Value* waived = root.find("waived"); waived != nullptr && !waived->is_null()) {
    part.waived = waived->as_string();
  }
  const json::Value& options = root.at("options");
  if (const json::Value* world = options.find("world_size"); world != nullptr && world->is_int()) {
    part.world_size = static_cast<int>(world->as_int());
  }
  if (const json::Value* ranks = root.find("allgather_ranks"); ranks != nullptr && ranks->is_int()) {
    part.allgather_ranks = static_cast<int>(ranks->as_int());
  }
  if (const json::Value* shared = root.find("gpus_shared"); shared != nullptr && shared->is_bool()) {
    part.gpus_shared = shared->as_bool();
  }
  for (const auto& note : root.at("notes").as_array()) part.notes.push_back(note.as_string());
  for (const auto& fg : root.at("foregrounds").as_array()) part.foregrounds.push_back(foreground_from_json(fg));
  for (const auto& t : root.at("traffic").as_array()) part.traffic.push_back(traffic_run_from_json(t));
  for (const auto& row : root.at("results").as_array()) part.rows.push_back(row_from_json(row));
  // The configuration's variables must have reached the child, or its rows would not measure the network path.
  for (auto& problem : unrecorded_environment(root, child.config.set)) file.problems.push_back(std::move(problem));
}

ChildFile read_child_file(const LanesChild& child, const std::string& json_path) {
  ChildFile file;
  std::optional<std::string> text = topology::read_text_file(json_path);
  if (!text || text->empty()) {
    file.problems.push_back("it wrote no result file");
    return file;
  }
  try {
    read_file_into(file, child, json::parse(*text));
  } catch (const Error& e) {
    file = ChildFile{};
    file.problems.push_back(cat("its result file is unusable: ", plain_message(e)));
  }
  return file;
}

/// Why the child as a whole failed (empty when it did not): its end against what its file says.
std::vector<std::string> child_problems(const ChildOutcome& outcome, ChildFile& file, const LanesChild& child) {
  std::vector<std::string> problems = std::move(file.problems);
  const bool ended = outcome.exited && !outcome.timed_out && (outcome.exit_code == 0 || outcome.exit_code == 1);
  if (!ended) {
    problems.push_back("it did not end with its verdict (0 or 1)");
  } else if (file.exit_code && *file.exit_code != outcome.exit_code) {
    problems.push_back(cat("its result file records exit code ", *file.exit_code));
  } else if (outcome.exit_code == 1 && file.exit_code && !file_explains_failure(file.part)) {
    problems.push_back("its result file names nothing that failed");
  }
  if (file.exit_code && file.part.waived.empty()) {
    const bool has_run = std::any_of(file.part.traffic.begin(), file.part.traffic.end(), [&](const TrafficRun& run) {
      return run.background == "p2p" && run.backend == child.backend;
    });
    if (!has_run) problems.push_back(cat("its result file has no p2p traffic run for ", child.backend));
  }
  return problems;
}

void add_once(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

void merge_foregrounds(InterferenceReport& report, const std::vector<ForegroundInfo>& theirs, const LanesChild& child) {
  for (const auto& fg : theirs) {
    auto mine = std::find_if(report.foregrounds.begin(), report.foregrounds.end(),
                             [&](const ForegroundInfo& f) { return f.name == fg.name; });
    if (mine == report.foregrounds.end()) {
      report.foregrounds.push_back(fg);
    } else if (severity(fg.status) > severity(mine->status)) {
      mine->status = fg.status;
      mine->detail = cat("lanes ", child.lanes, ", ", child.backend, ": ", fg.detail);
    }
  }
}

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : "; ") + p;
  return text;
}

}  // namespace

std::string stderr_summary(const std::string& stderr_path, int max_lines) {
  std::istringstream lines(file_tail(stderr_path, max_lines));
  std::string text;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) text += (text.empty() ? "" : " | ") + line;
  }
  return text;
}

void merge_lanes_child(InterferenceReport& report, const LanesChild& child, const ChildOutcome& outcome,
                       const std::string& json_path, const std::string& stderr_path) {
  ChildFile file = read_child_file(child, json_path);
  const std::vector<std::string> problems = child_problems(outcome, file, child);
  InterferenceReport& part = file.part;

  merge_foregrounds(report, part.foregrounds, child);
  for (const auto& note : part.notes) add_once(report.notes, note);
  report.world_size = std::max(report.world_size, part.world_size);
  report.allgather_ranks = std::max(report.allgather_ranks, part.allgather_ranks);
  report.gpus_shared = report.gpus_shared || part.gpus_shared;
  for (auto& row : part.rows) {
    row.lanes = child.lanes;
    row.env = child.config.set;
    if (std::find(report.sizes.begin(), report.sizes.end(), row.bytes) == report.sizes.end()) {
      report.sizes.insert(std::upper_bound(report.sizes.begin(), report.sizes.end(), row.bytes), row.bytes);
    }
    report.rows.push_back(std::move(row));
  }

  // The child's run for its backend (its file has no other): kept as the child said, or made to say it failed.
  TrafficRun run{"p2p", child.backend, RunStatus::Failed, "", child.lanes, child.config.set};
  for (const auto& theirs : part.traffic) {
    if (theirs.background == "p2p" && theirs.backend == child.backend) {
      run.status = theirs.status;
      run.detail = theirs.detail;
    }
  }
  if (!part.waived.empty() && problems.empty()) {
    run.status = RunStatus::Unavailable;  // the child found the machine as the orchestrator did not: say so
    run.detail = cat("the child was waived: ", part.waived);
  }
  const std::string who = cat("`pickle bench interference --backend ", child.backend, "` with ", child.lanes,
                              " lane(s) ");
  if (!problems.empty()) {
    run.status = RunStatus::Failed;
    run.detail = cat(who, outcome.describe(), ": ", joined(problems),
                     run.detail.empty() ? "" : "; its traffic run said: ", run.detail);
  }
  const std::string tail = stderr_summary(stderr_path, 8);
  if (run.status == RunStatus::Failed && !tail.empty()) {
    run.detail += cat("; its stderr, last lines: ", tail);
  } else if (run.status == RunStatus::Unavailable && run.detail.empty()) {
    run.detail = tail.empty() ? cat(who, "said its backend is unavailable and not why") : tail;
  }
  report.traffic.push_back(std::move(run));
}

}  // namespace pickle::bench
