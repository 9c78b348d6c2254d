#pragma once
// What the reduction kernels of reduce_cuda.cu and ll_allreduce_cuda.cu share around a launch: the device current
// for it (LaunchDevice), loading every instance ahead of the first launch (load_kernels), how many CTAs of them the
// GPU holds at once (resident_ctas), and the error of a failed launch (throw_launch_error). The launch itself:
// device::cuda::launch_kernel. nvcc only.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string>

#include <pickle/error.hpp>

#include "collectives/reduce.hpp"

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

/// Calls fn(type, op, kernel) for every datatype and operator, with kernel the instance
/// `kernel_of(Element<...>{}, std::integral_constant<ReduceOp, ...>{})` (a kernel's address).
template <class KernelOf, class Fn>
void for_each_kernel(KernelOf kernel_of, Fn fn) {
  for (DataType type : kReduceTypes) {
    for (ReduceOp op : kReduceOps) {
      dispatch_type(
          type, [&](auto element) { dispatch_op(op, [&](auto which) { fn(type, op, kernel_of(element, which)); }); });
    }
  }
}

/// Loads every instance (for_each_kernel) on `device`, so that no first launch loads one (which may synchronize the
/// context); `what` names the kernel in the CudaError of a failure.
template <class KernelOf>
void load_kernels(int device, const char* what, KernelOf kernel_of) {
  LaunchDevice current(device);
  for_each_kernel(kernel_of, [&](DataType type, ReduceOp op, const void* kernel) {
    cudaFuncAttributes attributes{};
    const cudaError_t status = cudaFuncGetAttributes(&attributes, kernel);
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw CudaError(std::string("loading the ") + what + " (" + datatype_name(type) + " " + reduce_op_name(op) +
                          ") on device " + std::to_string(device) + ": " + cudaGetErrorName(status) + ": " +
                          cudaGetErrorString(status),
                      static_cast<int>(status));
    }
  });
}

/// CTAs of `threads` threads of every instance (for_each_kernel) that `device` holds at once: the fewest any instance
/// fits on an SM, times the SMs; 0 if CUDA cannot say. Asked once per device and kernel (a static per `KernelOf`
/// type): the answer does not change while the process lives. A gated launch takes no more: its first CTAs wait for
/// the peers, whose kernels wait for this one's last CTAs, so every CTA must run at once.
template <class KernelOf>
int resident_ctas(int device, KernelOf kernel_of, int threads) {
  static std::mutex mutex;
  static std::map<int, int> by_device;
  std::lock_guard lock(mutex);
  if (const auto known = by_device.find(device); known != by_device.end()) return known->second;
  LaunchDevice current(device);
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int fewest = INT_MAX;
  for_each_kernel(kernel_of, [&](DataType, ReduceOp, const void* kernel) {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) != cudaSuccess) {
      cudaGetLastError();
      per_sm = 0;
    }
    fewest = std::min(fewest, per_sm);
  });
  const int resident = fewest * sms;
  if (resident > 0) by_device.emplace(device, resident);
  return resident;
}

/// The CudaError of a launch that failed with `status`; `what` describes the launch.
[[noreturn]] inline void throw_launch_error(cudaError_t status, const std::string& what) {
  throw CudaError(what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status), static_cast<int>(status));
}

}  // namespace pickle::coll
