#pragma once
// LaunchDevice: the device current for a kernel launch, the caller's restored afterwards. nvcc only (the reduction
// kernels of reduce_cuda.cu and ll_allreduce_cuda.cu).
#include <cuda_runtime.h>

#include <string>

#include <pickle/error.hpp>

namespace pickle::coll {

/// Makes `device` current for the launch and restores the caller's device afterwards.
class LaunchDevice {
 public:
  explicit LaunchDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) {
      cudaError_t status = cudaSetDevice(device);
      if (status != cudaSuccess) {
        cudaGetLastError();
        throw CudaError(std::string("reduction: cudaSetDevice(") + std::to_string(device) +
                            ") failed: " + cudaGetErrorString(status),
                        static_cast<int>(status));
      }
      restore_ = previous_ >= 0;
    }
  }
  ~LaunchDevice() {
    if (restore_ && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
  }
  LaunchDevice(const LaunchDevice&) = delete;
  LaunchDevice& operator=(const LaunchDevice&) = delete;

 private:
  int previous_ = -1;
  bool restore_ = false;
};

}  // namespace pickle::coll
