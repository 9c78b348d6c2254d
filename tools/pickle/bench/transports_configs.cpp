#include "transports_configs.hpp"

#include <string>
#include <vector>

#include "core/format.hpp"

namespace pickle::bench {

std::span<const Configuration> configurations() {
  // NCCL_SHM_DISABLE is cleared for the SHM row: with it set, NCCL would fall back to its network path and the row
  // would not measure what its name says.
  static const std::vector<Configuration> table = {
      {"nccl-p2p", "NCCL (default: P2P/NVLink)", "nccl", {}, {"NCCL_P2P_DISABLE"}},
      {"nccl-shm", "NCCL (NCCL_P2P_DISABLE=1: SHM)", "nccl", {{"NCCL_P2P_DISABLE", "1"}}, {"NCCL_SHM_DISABLE"}},
      {"pickle-ipc", "pickle ipc", "pickle", {{"PICKLE_TRANSPORT", "ipc"}}, {}},
      {"pickle-shm", "pickle shm", "pickle", {{"PICKLE_TRANSPORT", "shm"}}, {}},
  };
  return table;
}

std::span<const Comparison> comparisons() {
  static constexpr Comparison table[] = {
      {"nccl-p2p", "nccl-shm", "NCCL P2P over NCCL SHM"},
      {"pickle-ipc", "pickle-shm", "pickle ipc over pickle shm"},
      {"pickle-shm", "nccl-shm", "pickle shm over NCCL SHM"},
  };
  return table;
}

const Configuration* find_configuration(std::string_view key) {
  for (const auto& config : configurations()) {
    if (config.key == key) return &config;
  }
  return nullptr;
}

std::string_view child_suite(TransportOp op) noexcept { return op == TransportOp::P2p ? "p2p" : "coll"; }

std::vector<std::string> child_arguments(const TransportsOptions& options, TransportOp op, const Configuration& config,
                                         const std::string& json_path) {
  std::vector<std::string> args = {"bench", std::string(child_suite(op))};
  if (op == TransportOp::Allreduce) args.insert(args.end(), {"-c", "allreduce"});
  args.insert(args.end(), {"--backend", std::string(config.backend)});
  // Seed 000 compares one direction's bandwidth; bi and lat would triple the time for nothing the table shows.
  if (op == TransportOp::P2p) args.insert(args.end(), {"--mode", "uni"});
  args.insert(args.end(), {"--json", json_path, "-b", cat(options.min_bytes), "-f", cat(options.factor)});
  if (options.max_bytes != 0) args.insert(args.end(), {"-e", cat(options.max_bytes)});
  if (options.iterations_given) args.insert(args.end(), {"-n", cat(options.iterations)});
  if (options.warmup_given) args.insert(args.end(), {"-w", cat(options.warmup)});
  if (options.repeats > 0) args.insert(args.end(), {"--repeats", cat(options.repeats)});
  if (options.ranks > 0) args.insert(args.end(), {"--ranks", cat(options.ranks)});
  if (!options.memory.empty()) args.insert(args.end(), {"--memory", options.memory});
  return args;
}

std::vector<std::string> child_environment(const std::vector<std::string>& base, const Configuration& config) {
  std::vector<std::string> env = base;
  auto remove = [&](std::string_view name) {
    std::string key = cat(name, "=");
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(key); });
  };
  for (auto name : config.unset) remove(name);
  for (const auto& [name, value] : kCommonEnv) {
    remove(name);
    env.push_back(cat(name, "=", value));
  }
  for (const auto& [name, value] : config.set) {
    remove(name);
    env.push_back(cat(name, "=", value));
  }
  return env;
}

}  // namespace pickle::bench
