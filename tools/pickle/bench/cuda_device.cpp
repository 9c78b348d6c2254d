#include "cuda_device.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"

#if PICKLE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pickle::bench {

void bind_cuda_device(int device) {
#if PICKLE_HAVE_CUDA
  cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess) {
    cudaGetLastError();  // leave no sticky "last error" behind for the next caller
    throw CudaError(cat(describe({.op = "select the rank's GPU"}), ": cudaSetDevice(", device, ") failed: ",
                        cudaGetErrorName(status), " (", cudaGetErrorString(status), ")"),
                    static_cast<int>(status));
  }
#else
  throw UnavailableError(cat("cannot use GPU ", device, ": this pickle was built without CUDA"));
#endif
}

}  // namespace pickle::bench
