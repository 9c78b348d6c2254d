#include "interference_cublaslt.hpp"

#include <type_traits>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "library_search.hpp"

namespace pickle::bench {
namespace {

/// Resolves `name` into `slot` with the slot's own type (the declaration in cublasLt.h).
template <class F>
void bind(const DynamicLibrary& lib, F*& slot, const char* name) {
  slot = lib.symbol<F>(name);
}

}  // namespace

std::vector<std::string> cublaslt_candidates() {
  return nvidia_library_candidates({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                                   {"cu13", "cu12", "cublas"}, "libcublasLt.so*");
}

CublasLtApi CublasLtApi::load() {
  std::string first_error;
  const std::vector<std::string> candidates = cublaslt_candidates();
  if (auto library = open_first(candidates, &first_error)) {
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
    api.algo_config_get =
        lib.find<std::remove_pointer_t<decltype(api.algo_config_get)>>("cublasLtMatmulAlgoConfigGetAttribute");
    api.status_string_ = lib.find<std::remove_pointer_t<decltype(api.status_string_)>>("cublasLtGetStatusString");
    auto get_version = lib.symbol<std::size_t()>("cublasLtGetVersion");
    const std::size_t code = get_version();
    api.version_ = cat(code / 10000, ".", (code % 10000) / 100, ".", code % 100);
    if (code < 110000) {
      throw UnavailableError(cat(lib.path(), ": cuBLASLt ", api.version_, " is too old (needs 11.0 or newer)"));
    }
    return api;
  }
  throw UnavailableError(cat("cannot load cuBLASLt (tried ", candidates.size(), " places: libcublasLt.so.13, .so.12, ",
                             ".so, /usr/local/cuda/lib64 and Python's nvidia packages): ", first_error));
}

void CublasLtApi::check(cublasStatus_t status, const char* call, const std::string& what) const {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* name = status_string_ != nullptr ? status_string_(status) : nullptr;
  throw Error(ErrorCode::Cuda, cat(what, ": ", call, " returned ", static_cast<int>(status), " (",
                                   name != nullptr ? name : "unknown cuBLAS status", ")"));
}

}  // namespace pickle::bench
