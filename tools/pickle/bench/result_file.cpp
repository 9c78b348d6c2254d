#include "result_file.hpp"

#include <cerrno>
#include <ctime>
#include <fstream>
#include <utility>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "environment.hpp"
#include "topology/topology.hpp"
#include "topology/topology_json.hpp"

namespace pickle::bench {

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  char text[32] = "?";
  if (gmtime_r(&now, &utc) != nullptr) std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

json::Value string_array(const std::vector<std::string>& items) {
  json::Value array = json::Value::array();
  for (const auto& item : items) array.push_back(item);
  return array;
}

json::Value number_array(const std::vector<double>& items) {
  json::Value array = json::Value::array();
  for (double item : items) array.push_back(item);
  return array;
}

json::Value result_head(std::string_view suite, const std::vector<std::string>& command,
                        const std::string& started_utc) {
  json::Value root = json::Value::object();
  root["schema"] = "pickle-bench/1";
  root["suite"] = suite;
  root["command"] = string_array(command);
  root["started_utc"] = started_utc;
  return root;
}

json::Value sweep_options_json(const SweepOptions& sweep, std::size_t max_bytes, std::string_view count_key) {
  json::Value options = json::Value::object();
  options["min_bytes"] = sweep.min_bytes;
  options["max_bytes"] = max_bytes;
  options["factor"] = sweep.factor;
  options[count_key] = sweep.iterations;
  options["warmup"] = sweep.warmup;
  return options;
}

void require_writable(const std::string& path, std::string_view flag) {
  if (path.empty()) return;
  std::ofstream probe(path, std::ios::app);
  if (!probe) throw SystemError(cat("cannot write the ", flag, " file ", path), errno);
}

void write_result_file(json::Value root, const std::string& path, std::string_view suite) {
  root["environment"] = environment_json();
  root["topology"] = topology::to_json(topology::discover(topology::DiscoverOptions{.memory_free = false}));
  std::ofstream file(path, std::ios::trunc);
  if (!file) throw SystemError(cat("bench ", suite, ": cannot open --json file ", path), errno);
  file << root.dump(2) << "\n";
  file.close();
  if (!file) throw SystemError(cat("bench ", suite, ": cannot write --json file ", path), errno);
}

}  // namespace pickle::bench
