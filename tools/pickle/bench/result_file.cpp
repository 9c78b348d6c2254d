#include "result_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
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
  // Only a regular file (or none yet): opening a FIFO for writing waits for a reader (a run that hung before it
  // began: found by review), and the result is written beside the path and renamed over it (write_result_file).
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    throw InvalidArgument(cat("cannot write the ", flag, " file ", path, ": it exists and is not a regular file"));
  }
  // A file the probe makes is removed again: a run that fails later must not leave an empty result file behind,
  // which `pickle report` would then refuse as not JSON.
  const bool existed = access(path.c_str(), F_OK) == 0;
  {
    std::ofstream probe(path, std::ios::app);
    if (!probe) throw SystemError(cat("cannot write the ", flag, " file ", path), errno);
  }
  if (!existed) unlink(path.c_str());
}

namespace {

/// Set by mark_run_broken; read by write_result_file on the same thread (the suite's, at its end).
std::optional<std::string>& broken_run() {
  static std::optional<std::string> error;
  return error;
}

}  // namespace

void mark_run_broken(const std::string& error) { broken_run() = error; }

void write_result_file(json::Value root, const std::string& path) {
  if (const auto& broken = broken_run()) {
    root["exit_code"] = 1;
    root["broken_run"] = *broken;
  }
  root["environment"] = environment_json();
  root["topology"] = topology::to_json(topology::discover(topology::DiscoverOptions{.memory_free = false}));
  // Written beside the file and renamed over it once complete: a disk that fills up midway leaves no truncated
  // result, and an earlier result at that path stays whole (found by review: the file was truncated first). A link
  // is followed, so that the file it names is the one replaced.
  std::error_code ignored;
  const std::filesystem::path target = std::filesystem::is_symlink(path, ignored)
                                           ? std::filesystem::weakly_canonical(path, ignored)
                                           : std::filesystem::path(path);
  const std::string partial = cat(target.string(), ".partial-", getpid());
  std::ofstream file(partial, std::ios::trunc);
  if (!file) throw SystemError(cat("cannot write the --json file ", path), errno);
  file << root.dump(2) << "\n";
  file.close();
  if (!file) {
    const int error = errno;
    unlink(partial.c_str());
    throw SystemError(cat("cannot write the --json file ", path, " to its end"), error);
  }
  if (std::rename(partial.c_str(), target.c_str()) != 0) {
    const int error = errno;
    unlink(partial.c_str());
    throw SystemError(cat("cannot write the --json file ", path, " (renaming its complete copy over it)"), error);
  }
}

}  // namespace pickle::bench
