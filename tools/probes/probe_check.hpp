#pragma once
// How a probe fails on a CUDA error: the probe's name, what it was doing and CUDA's word for it on stderr, then exit
// 1 (a probe measures; there is nothing to recover). C++17: some probes are CUDA sources.
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>  // program_invocation_short_name (glibc)

#include <cstdio>
#include <cstdlib>

namespace probe {

inline void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, cudaGetErrorString(status));
  std::exit(1);
}

/// Driver calls: the numeric CUresult (cuGetErrorName would tie every probe to libcuda).
inline void check(CUresult status, const char* what) {
  if (status == CUDA_SUCCESS) return;
  std::fprintf(stderr, "%s: %s: CUresult %d\n", program_invocation_short_name, what, static_cast<int>(status));
  std::exit(1);
}

}  // namespace probe
