#pragma once
// The part of cuBLASLt that the GEMM foreground calls, loaded at run time (dlopen) so that pickle builds and runs
// without it and says clearly when it is missing. cublasLt.h from the CUDA toolkit supplies the types and the
// declarations the function pointers copy (decltype), never a link-time dependency.

#include <string>
#include <vector>

#include <cublasLt.h>

#include "core/dynlib.hpp"

namespace pickle::bench {

class CublasLtApi {
 public:
  /// Loads libcublasLt: libcublasLt.so.13, .so.12 and .so by the loader's search path, then the CUDA toolkit's
  /// lib64, then the lib folder of Python's nvidia cuBLAS wheel (nvidia/cu13, nvidia/cu12, nvidia/cublas under the
  /// site-packages of python3 on PATH, $VIRTUAL_ENV, $CONDA_PREFIX, /usr/local and /usr). UnavailableError listing
  /// what was tried when none loads or a symbol is missing.
  static CublasLtApi load();

  /// "13.0.0"
  const std::string& version() const { return version_; }
  /// The file the loader chose.
  std::string path() const { return library_.path(); }

  /// Throws Error(Cuda) "<what>: <call> returned <status> (<name>)" unless `status` is CUBLAS_STATUS_SUCCESS.
  void check(cublasStatus_t status, const char* call, const std::string& what) const;

  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  /// May be null (absent in old releases): only used to describe an algorithm.
  decltype(&cublasLtMatmulAlgoConfigGetAttribute) algo_config_get = nullptr;

 private:
  explicit CublasLtApi(DynamicLibrary library) : library_(std::move(library)) {}

  DynamicLibrary library_;
  std::string version_;
  decltype(&cublasLtGetStatusString) status_string_ = nullptr;  // may be absent in old releases
};

/// Where load() looks, in order (exposed for the message that lists them).
std::vector<std::string> cublaslt_candidates();

}  // namespace pickle::bench
