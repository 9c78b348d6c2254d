#include "transports_results.hpp"

#include <algorithm>
#include <set>

namespace pickle::bench {

const char* run_status_name(RunResult::Status status) noexcept {
  switch (status) {
    case RunResult::Status::Ok: return "ok";
    case RunResult::Status::Unavailable: return "unavailable";
    case RunResult::Status::Failed: return "failed";
  }
  return "?";
}

const char* config_status_name(ConfigRuns::Status status) noexcept {
  switch (status) {
    case ConfigRuns::Status::Ok: return "ok";
    case ConfigRuns::Status::Skipped: return "skipped";
    case ConfigRuns::Status::Failed: return "failed";
  }
  return "?";
}

ConfigRuns::Status ConfigRuns::status() const {
  for (const auto& run : runs) {
    if (run.status == RunResult::Status::Failed) return Status::Failed;
  }
  if (!runs.empty() && runs.front().status == RunResult::Status::Unavailable) return Status::Skipped;
  return Status::Ok;
}

std::string ConfigRuns::detail() const {
  for (const auto& run : runs) {
    if (run.status != RunResult::Status::Ok) return run.detail;
  }
  return {};
}

std::vector<const RunResult*> ConfigRuns::ok_runs() const {
  std::vector<const RunResult*> ok;
  for (const auto& run : runs) {
    if (run.status == RunResult::Status::Ok) ok.push_back(&run);
  }
  return ok;
}

std::optional<double> ConfigRuns::mean(std::size_t bytes) const {
  double sum = 0;
  int n = 0;
  for (const RunResult* run : ok_runs()) {
    auto it = run->gbps.find(bytes);
    if (it == run->gbps.end()) continue;
    sum += it->second;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

const ConfigRuns* OpSection::find(std::string_view key) const {
  for (const auto& c : configs) {
    if (c.config->key == key) return &c;
  }
  return nullptr;
}

std::vector<std::size_t> OpSection::sizes() const {
  std::set<std::size_t> all;
  for (const auto& c : configs) {
    for (const auto& run : c.runs) {
      for (const auto& [bytes, gbps] : run.gbps) all.insert(bytes);
    }
  }
  return {all.begin(), all.end()};
}

std::optional<std::size_t> OpSection::largest_common() const {
  std::optional<std::set<std::size_t>> common;
  for (const auto& c : configs) {
    if (c.status() != ConfigRuns::Status::Ok) continue;
    for (const RunResult* run : c.ok_runs()) {
      std::set<std::size_t> mine;
      for (const auto& [bytes, gbps] : run->gbps) mine.insert(bytes);
      if (!common) {
        common = std::move(mine);
      } else {
        std::erase_if(*common, [&](std::size_t b) { return !mine.contains(b); });
      }
    }
  }
  if (!common || common->empty()) return std::nullopt;
  return *common->rbegin();
}

std::optional<double> OpSection::gain(const Comparison& comparison, std::size_t bytes) const {
  const ConfigRuns* fast = find(comparison.fast);
  const ConfigRuns* slow = find(comparison.slow);
  if (fast == nullptr || slow == nullptr) return std::nullopt;
  if (fast->status() != ConfigRuns::Status::Ok || slow->status() != ConfigRuns::Status::Ok) return std::nullopt;
  auto f = fast->mean(bytes), s = slow->mean(bytes);
  if (!f || !s || *s <= 0) return std::nullopt;
  return *f / *s;
}

int TransportsReport::exit_code() const {
  for (const auto& section : ops) {
    for (const auto& c : section.configs) {
      if (c.status() == ConfigRuns::Status::Failed) return 1;
    }
  }
  return 0;
}

const char* metric_name(TransportOp op) noexcept {
  return op == TransportOp::P2p ? "unidirectional bandwidth (GB/s)" : "busbw (GB/s)";
}

}  // namespace pickle::bench
