#include "library_search.hpp"

#include <glob.h>
#include <unistd.h>

#include "core/env.hpp"
#include "core/format.hpp"

namespace pickle::bench {
namespace {

/// The prefix of the python3 that PATH finds (/opt/venv for /opt/venv/bin/python3), or "" when there is none. No
/// process is started: that would mean a fork in a process that may already use CUDA.
std::string python_prefix() {
  for (const std::string& dir : env::path_folders()) {
    std::string candidate = dir + "/python3";
    if (access(candidate.c_str(), X_OK) != 0) continue;
    // A virtual environment's bin/python3 links to the system interpreter: the venv is where the link lives, so
    // take the folder above bin/ as given, not the link's target.
    std::size_t slash = dir.find_last_of('/');
    return slash == std::string::npos || slash == 0 ? std::string() : dir.substr(0, slash);
  }
  return {};
}

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> found;
  glob_t matches{};
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) found.emplace_back(matches.gl_pathv[i]);
  }
  globfree(&matches);
  return found;
}

}  // namespace

std::vector<std::string> nvidia_library_candidates(const std::vector<std::string>& sonames,
                                                   const std::vector<std::string>& packages,
                                                   const std::string& file_glob) {
  std::vector<std::string> candidates(sonames);
  for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}) {
    for (const auto& soname : sonames) candidates.push_back(cat(dir, "/", soname));
  }
  std::vector<std::string> prefixes;
  if (std::string prefix = python_prefix(); !prefix.empty()) prefixes.push_back(prefix);
  for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (auto value = env::foreign(variable); value && !value->empty()) prefixes.push_back(*value);
  }
  prefixes.emplace_back("/usr/local");
  prefixes.emplace_back("/usr");
  for (const auto& prefix : prefixes) {
    for (const auto& package : packages) {
      const std::string pattern = cat(prefix, "/lib/python3*/*-packages/nvidia/", package, "/lib/", file_glob);
      for (const auto& path : glob_paths(pattern)) candidates.push_back(path);
    }
  }
  return candidates;
}

std::optional<DynamicLibrary> open_first(const std::vector<std::string>& candidates, std::string* first_error) {
  for (const auto& candidate : candidates) {
    std::string error;
    auto library = DynamicLibrary::try_open(candidate, &error);
    if (library) return library;
    if (first_error != nullptr && first_error->empty()) *first_error = error;
  }
  return std::nullopt;
}

}  // namespace pickle::bench
