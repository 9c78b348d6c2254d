#include "transports_configs.hpp"

#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {

namespace {

std::deque<Configuration>& config_table() {
  static std::deque<Configuration> table;
  return table;
}

std::vector<Comparison>& comparison_table() {
  static std::vector<Comparison> table;
  return table;
}

void seed_000(std::deque<Configuration>& configs, std::vector<Comparison>& gains) {
  // NCCL_SHM_DISABLE is cleared for the SHM row: with it set, NCCL would fall back to its network path and the row
  // would not measure what its name says.
  configs.push_back({"nccl-p2p", "NCCL (default: P2P/NVLink)", "nccl", {}, {"NCCL_P2P_DISABLE"}});
  configs.push_back({"nccl-shm", "NCCL (NCCL_P2P_DISABLE=1: SHM)", "nccl", {{"NCCL_P2P_DISABLE", "1"}},
                     {"NCCL_SHM_DISABLE"}});
  configs.push_back({"pickle-ipc", "pickle ipc", "pickle", {{"PICKLE_TRANSPORT", "ipc"}}, {}});
  configs.push_back({"pickle-shm", "pickle shm", "pickle", {{"PICKLE_TRANSPORT", "shm"}}, {}});
  gains = {{"nccl-p2p", "nccl-shm", "NCCL P2P over NCCL SHM"},
           {"pickle-ipc", "pickle-shm", "pickle ipc over pickle shm"},
           {"pickle-shm", "nccl-shm", "pickle shm over NCCL SHM"}};
}

/// Seed 001's network experiment on one host: both libraries forced onto their network path over `iface`, with as
/// many sockets (NCCL: one per thread) as pickle has lanes.
void seed_001_network(const std::vector<int>& lanes, const std::string& iface, std::deque<Configuration>& configs,
                      std::vector<Comparison>& gains) {
  for (int count : lanes) {
    configs.push_back(network_configuration("nccl", count, iface));
    configs.push_back(network_configuration("pickle", count, iface));
    gains.push_back({cat("pickle-net-", count), cat("nccl-socket-", count),
                     cat("pickle net over NCCL Socket, ", count, " lane(s)")});
  }
}

}  // namespace

void choose_configurations(const TransportsOptions& options) {
  auto& configs = config_table();
  auto& gains = comparison_table();
  configs.clear();
  gains.clear();
  if (options.lanes.empty()) {
    seed_000(configs, gains);
  } else {
    seed_001_network(options.lanes, options.iface, configs, gains);
  }
}

const std::deque<Configuration>& configurations() { return config_table(); }

const std::vector<Comparison>& comparisons() { return comparison_table(); }

Configuration network_configuration(std::string_view backend, int lanes, const std::string& iface) {
  const std::string n = cat(lanes);
  if (backend == "nccl") {
    // NCCL_P2P_DISABLE and NCCL_SHM_DISABLE keep NCCL off its on-host paths, so that it takes the network one;
    // one socket per thread, so that each socket, like each of pickle's lanes, has a thread driving it; one channel
    // per network peer, since each channel opens its own connection of that many sockets: NCCL 2.28's default of
    // two ("2 p2p channels per peer" in its INFO log) ran two sockets where the row said one (2026-11-29i).
    return {cat("nccl-socket-", n), cat("NCCL Socket, ", n, " socket(s)"), "nccl",
            {{"NCCL_P2P_DISABLE", "1"},
             {"NCCL_SHM_DISABLE", "1"},
             {"NCCL_NET", "Socket"},
             {"NCCL_SOCKET_IFNAME", iface},
             {"NCCL_SOCKET_NTHREADS", n},
             {"NCCL_NSOCKS_PERTHREAD", "1"},
             {"NCCL_NCHANNELS_PER_NET_PEER", "1"}},
            {}};
  }
  if (backend == "pickle") {
    return {cat("pickle-net-", n), cat("pickle net, ", n, " lane(s)"), "pickle",
            {{"PICKLE_TRANSPORT", "net"}, {"PICKLE_NET_IFACE", iface}, {"PICKLE_NET_LANES", n}},
            {}};
  }
  throw InvalidArgument(cat("no network configuration for backend '", backend, "' (choose from nccl, pickle)"));
}

std::vector<int> parse_lane_counts(const std::string& list) {
  std::vector<int> lanes;
  for (const auto& item : split_list(list, "--lanes")) lanes.push_back(static_cast<int>(parse_int(item, "--lanes", 1, 16)));
  return lanes;
}

std::vector<std::string> unrecorded_environment(const json::Value& root,
                                                const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> problems;
  const json::Value* env = root.find("environment");
  auto expect = [&](std::string_view name, std::string_view value) {
    const json::Value* seen = env != nullptr ? env->find(name) : nullptr;
    if (seen == nullptr || !seen->is_string() || seen->as_string() != value) {
      problems.push_back(cat("its result file does not record ", name, "=", value, " in its environment"));
    }
  };
  for (const auto& [name, value] : kCommonEnv) expect(name, value);
  for (const auto& [name, value] : set) expect(name, value);
  return problems;
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
