#include "interference_cublaslt.hpp"

#include <glob.h>
#include <unistd.h>

#include <type_traits>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"

namespace pickle::bench {
namespace {

constexpr const char* kSonames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};

/// The prefix of the python3 that PATH finds (/opt/venv for /opt/venv/bin/python3), or "" when there is none. No
/// process is started: that would mean a fork in a process that may already use CUDA.
std::string python_prefix() {
  auto path = env::foreign("PATH");
  if (!path) return {};
  std::size_t start = 0;
  while (start <= path->size()) {
    std::size_t colon = path->find(':', start);
    std::string dir = path->substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    start = colon == std::string::npos ? path->size() + 1 : colon + 1;
    if (dir.empty()) continue;
    std::string candidate = dir + "/python3";
    if (access(candidate.c_str(), X_OK) != 0) continue;
    // A virtual environment's bin/python3 links to the system interpreter: the venv is where the link lives, so
    // take the folder above bin/ as given, not the link's target.
    std::size_t slash = dir.find_last_of('/');
    return slash == std::string::npos || slash == 0 ? std::string() : dir.substr(0, slash);
  }
  return {};
}

/// Resolves `name` into `slot` with the slot's own type (the declaration in cublasLt.h).
template <class F>
void bind(const DynamicLibrary& lib, F*& slot, const char* name) {
  slot = lib.symbol<F>(name);
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

std::vector<std::string> cublaslt_candidates() {
  std::vector<std::string> candidates(std::begin(kSonames), std::end(kSonames));
  for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}) {
    for (const char* soname : kSonames) candidates.push_back(cat(dir, "/", soname));
  }
  std::vector<std::string> prefixes;
  if (std::string prefix = python_prefix(); !prefix.empty()) prefixes.push_back(prefix);
  for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (auto value = env::foreign(variable); value && !value->empty()) prefixes.push_back(*value);
  }
  prefixes.emplace_back("/usr/local");
  prefixes.emplace_back("/usr");
  for (const auto& prefix : prefixes) {
    for (const char* package : {"cu13", "cu12", "cublas"}) {
      const std::string pattern = cat(prefix, "/lib/python3*/*-packages/nvidia/", package, "/lib/libcublasLt.so*");
      for (const auto& path : glob_paths(pattern)) candidates.push_back(path);
    }
  }
  return candidates;
}

CublasLtApi CublasLtApi::load() {
  std::string first_error;
  std::vector<std::string> candidates = cublaslt_candidates();
  for (const auto& candidate : candidates) {
    std::string error;
    auto library = DynamicLibrary::try_open(candidate, &error);
    if (!library) {
      if (first_error.empty()) first_error = error;
      continue;
    }
    CublasLtApi api(std::move(*library));
    const DynamicLibrary& lib = api.library_;
    bind(lib, api.create, "cublasLtCreate");
    bind(lib, api.destroy, "cublasLtDestroy");
    bind(lib, api.desc_create, "cublasLtMatmulDescCreate");
    bind(lib, api.desc_destroy, "cublasLtMatmulDescDestroy");
    bind(lib, api.desc_set, "cublasLtMatmulDescSetAttribute");
    bind(lib, api.layout_create, "cublasLtMatrixLayoutCreate");
    bind(lib, api.layout_destroy, "cublasLtMatrixLayoutDestroy");
    bind(lib, api.preference_create, "cublasLtMatmulPreferenceCreate");
    bind(lib, api.preference_destroy, "cublasLtMatmulPreferenceDestroy");
    bind(lib, api.preference_set, "cublasLtMatmulPreferenceSetAttribute");
    bind(lib, api.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    bind(lib, api.matmul, "cublasLtMatmul");
    api.status_string_ = lib.find<std::remove_pointer_t<decltype(api.status_string_)>>("cublasLtGetStatusString");
    auto get_version = lib.symbol<std::size_t()>("cublasLtGetVersion");
    const std::size_t code = get_version();
    api.version_ = cat(code / 10000, ".", (code % 10000) / 100, ".", code % 100);
    if (code < 110000) {
      throw UnavailableError(cat(lib.path(), ": cuBLASLt ", api.version_, " is too old (needs 11.0 or newer)"));
    }
    return api;
  }
  throw UnavailableError(cat("cannot load cuBLASLt (tried ", candidates.size(), " places: ", kSonames[0], ", ",
                             kSonames[1], ", ", kSonames[2], ", /usr/local/cuda/lib64 and Python's nvidia packages): ",
                             first_error));
}

void CublasLtApi::check(cublasStatus_t status, const char* call, const std::string& what) const {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* name = status_string_ != nullptr ? status_string_(status) : nullptr;
  throw Error(ErrorCode::Cuda, cat(what, ": ", call, " returned ", static_cast<int>(status), " (",
                                   name != nullptr ? name : "unknown cuBLAS status", ")"));
}

}  // namespace pickle::bench
