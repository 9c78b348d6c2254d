#pragma once
// What the reduction kernels of reduce_cuda.cu and ll_allreduce_cuda.cu share around a launch: the device current
// for it (LaunchDevice), loading every instance ahead of the first launch (load_kernels), how many CTAs of them the
// GPU holds at once (resident_ctas), the launch itself through the driver (launched_through_driver), and the error of
// a failed launch (throw_launch_error). nvcc only.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

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

/// Launches that launched_through_driver made (kernel_launches_through_driver).
inline std::atomic<std::uint64_t> driver_launches{0};

/// The driver entry point `name` at ABI `version`, through the runtime (pickle never links libcuda); null if absent.
template <class Fn>
Fn driver_entry_point(const char* name, int version) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    entry = nullptr;
  }
  return reinterpret_cast<Fn>(entry);
}

/// Launches `kernel` (the address of a __global__ function of this binary) on `ctas` CTAs of `threads` threads on
/// `stream`, with `args` as cuLaunchKernel takes them (a pointer to each parameter, in order, of exactly its type),
/// through the driver: cuLaunchKernel on the CUfunction that cudaGetFuncBySymbol gives for the current context,
/// looked up once per thread, context and kernel (a cache per thread: rank threads take no lock per launch). The
/// runtime's launch (<<<>>>) finds that handle again at every launch: on H200 hosts the driver's took 0.3-0.45 us less
/// host time per launch (3.0-4.5 us in all; tools/probes/launch_param_probe, 2026-12-01), of the 8-10 us that a small
/// allreduce costs its host. The launch's device must be current (LaunchDevice). False when nothing was launched: no
/// entry point, no context bound to this thread yet (the runtime's launch binds the device's primary one), no handle,
/// or the launch failed; the caller then launches through the runtime, which also reports a failure in the runtime's
/// terms, as before. A context destroyed and made again at the same address (cudaDeviceReset while kernels of pickle's
/// are in use, which pickle does not support) would find a stale handle.
inline bool launched_through_driver(const void* kernel, int ctas, int threads, cudaStream_t stream, void** args) {
  using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**);
  using CurrentContext = CUresult (*)(CUcontext*);
  static const LaunchKernel launch = driver_entry_point<LaunchKernel>("cuLaunchKernel", 4000);
  static const CurrentContext current_context = driver_entry_point<CurrentContext>("cuCtxGetCurrent", 4000);
  if (launch == nullptr || current_context == nullptr) return false;
  CUcontext context = nullptr;
  if (current_context(&context) != CUDA_SUCCESS || context == nullptr) return false;
  thread_local std::map<std::pair<CUcontext, const void*>, CUfunction> functions;
  CUfunction& function = functions[{context, kernel}];
  if (function == nullptr) {
    cudaFunction_t found = nullptr;
    if (cudaGetFuncBySymbol(&found, kernel) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    function = reinterpret_cast<CUfunction>(found);
  }
  if (launch(function, static_cast<unsigned>(ctas), 1, 1, static_cast<unsigned>(threads), 1, 1, 0,
             reinterpret_cast<CUstream>(stream), args, nullptr) != CUDA_SUCCESS) {
    return false;
  }
  driver_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

/// The CudaError of a launch that failed with `status`; `what` describes the launch.
[[noreturn]] inline void throw_launch_error(cudaError_t status, const std::string& what) {
  throw CudaError(what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status), static_cast<int>(status));
}

}  // namespace pickle::coll
