#include "cudnn_library.hpp"

#include <cstddef>
#include <vector>

#include <pickle/error.hpp>

#include "core/dynlib.hpp"
#include "core/format.hpp"
#include "library_search.hpp"

namespace pickle::bench {
namespace {

/// cuDNN 9's sub-libraries that graph-API SDPA uses; libcudnn.so.9 opens them by soname when first needed.
constexpr const char* kParts[] = {"libcudnn_graph.so.9", "libcudnn_heuristic.so.9",
                                  "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9"};

struct Loaded {
  std::vector<DynamicLibrary> libraries;  // kept open until the process exits
  CudnnLibrary info;
  std::string error;                      // non-empty: why libcudnn.so.9 did not load
};

std::string folder_of(const std::string& path) {
  std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

Loaded load() {
  Loaded loaded;
  std::string first_error;
  const std::vector<std::string> candidates = nvidia_library_candidates({"libcudnn.so.9"}, {"cudnn", "cu13"},
                                                                        "libcudnn.so.9*");
  auto library = open_first(candidates, &first_error);
  if (!library) {
    loaded.error = cat("cannot load cuDNN (tried ", candidates.size(), " places: libcudnn.so.9, /usr/local/cuda/lib64 "
                       "and Python's nvidia-cudnn packages): ", first_error);
    return loaded;
  }
  loaded.info.handle = library->native_handle();
  loaded.info.path = library->path();
  auto get_version = library->symbol<std::size_t()>("cudnnGetVersion");
  const std::size_t code = get_version();  // major * 10000 + minor * 100 + patch since cuDNN 9
  loaded.info.version = cat(code / 10000, ".", (code % 10000) / 100, ".", code % 100);
  loaded.libraries.push_back(std::move(*library));
  // A part that does not load here (absent, or its own dependency missing) is left to cuDNN, which reports it
  // when the graph needs it.
  const std::string folder = folder_of(loaded.info.path);
  for (const char* part : kParts) {
    if (folder.empty()) break;
    if (auto opened = DynamicLibrary::try_open(cat(folder, "/", part))) loaded.libraries.push_back(std::move(*opened));
  }
  const std::vector<std::string> runtimes = nvidia_library_candidates({"libcudart.so.13"}, {"cuda_runtime", "cu13"},
                                                                      "libcudart.so.13*");
  if (auto runtime = open_first(runtimes, nullptr)) loaded.libraries.push_back(std::move(*runtime));
  return loaded;
}

}  // namespace

const CudnnLibrary& cudnn_library() {
  // Never destroyed: the frontend's cached symbol addresses must stay valid until exit.
  static const Loaded* loaded = new Loaded(load());
  if (!loaded->error.empty()) throw UnavailableError(loaded->error);
  return loaded->info;
}

}  // namespace pickle::bench
