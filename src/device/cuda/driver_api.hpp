#pragma once
// The CUDA driver API, reached only through cudaGetDriverEntryPointByVersion: pickle never links libcuda, so one
// binary runs on machines with no driver (where cudart reports "insufficient driver" instead of failing to load).
// Also: error checking that turns every CUDA failure into a CudaError naming the call and the operation.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <new>
#include <string>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::device::cuda {

// Each entry point at the ABI version of its typedef: asking for an older version than the newest (e.g. 8000 for
// cuStreamWriteValue32) would hand back an older ABI (the v1 memory operations, which need a module parameter).
#define PICKLE_DRIVER_ENTRY_POINTS(X)              \
  X(cuGetErrorName, 6000)                          \
  X(cuGetErrorString, 6000)                        \
  X(cuDeviceGet, 2000)                             \
  X(cuDeviceGetAttribute, 2000)                    \
  X(cuPointerGetAttribute, 4000)                   \
  X(cuMemGetAddressRange, 3020)                    \
  X(cuMemCreate, 10020)                            \
  X(cuMemRelease, 10020)                           \
  X(cuMemAddressReserve, 10020)                    \
  X(cuMemAddressFree, 10020)                       \
  X(cuMemMap, 10020)                               \
  X(cuMemUnmap, 10020)                             \
  X(cuMemSetAccess, 10020)                         \
  X(cuMemGetAllocationGranularity, 10020)          \
  X(cuMemExportToShareableHandle, 10020)           \
  X(cuMemImportFromShareableHandle, 10020)         \
  X(cuMemRetainAllocationHandle, 11000)            \
  X(cuMemGetAllocationPropertiesFromHandle, 10020) \
  X(cuStreamWriteValue32, 11070)                   \
  X(cuStreamWaitValue32, 11070)                    \
  X(cuStreamBatchMemOp, 11070)                     \
  X(cuCtxGetCurrent, 4000)                         \
  X(cuLaunchKernel, 4000)

/// The driver entry points pickle uses; a member is null when the driver lacks it (calls then fail with an
/// UnavailableError naming the symbol).
struct DriverApi {
#define PICKLE_DRIVER_MEMBER(name, version) PFN_##name##_v##version name = nullptr;
  PICKLE_DRIVER_ENTRY_POINTS(PICKLE_DRIVER_MEMBER)
#undef PICKLE_DRIVER_MEMBER
};

/// The table, loaded once (thread-safe). No driver or no GPU: UnavailableError with cuda_unavailable_reason().
const DriverApi& driver();

/// Throws UnavailableError when there is no usable GPU, InvalidArgument when `device` is not a visible ordinal.
void require_device(int device, const OpContext& ctx);

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result.
std::string driver_error_text(CUresult result);

[[noreturn]] void throw_driver_error(CUresult result, const char* call, const OpContext& ctx);
[[noreturn]] void throw_runtime_error(cudaError_t error, const char* call, const OpContext& ctx);

/// Calls a driver entry point; a missing symbol is an UnavailableError, a failure a CudaError.
template <class Fn, class... Args>
void driver_call(Fn fn, const char* name, const OpContext& ctx, Args... args) {
  if (fn == nullptr) {
    throw UnavailableError(cat(describe(ctx), ": the CUDA driver has no entry point ", name,
                               " (driver older than this pickle needs?)"));
  }
  CUresult result = fn(args...);
  if (result != CUDA_SUCCESS) throw_driver_error(result, name, ctx);
}

/// Checks a runtime result; clears cudart's "last error" so that a handled failure does not surface later in
/// someone else's cudaGetLastError (PyTorch checks it after every kernel launch).
inline void runtime_check(cudaError_t error, const char* call, const OpContext& ctx) {
  if (error != cudaSuccess) throw_runtime_error(error, call, ctx);
}

}  // namespace pickle::device::cuda

/// PICKLE_CU(ctx, cuMemCreate, &handle, size, &prop, 0)
#define PICKLE_CU(ctx, name, ...) \
  ::pickle::device::cuda::driver_call(::pickle::device::cuda::driver().name, #name, ctx, __VA_ARGS__)
/// PICKLE_CUDA(ctx, cudaMalloc(&ptr, bytes))
#define PICKLE_CUDA(ctx, call) ::pickle::device::cuda::runtime_check((call), #call, ctx)

namespace pickle::device::cuda {

/// Makes `device` current on this thread for the guard's lifetime (restoring the previous one), so that driver
/// calls act on that device's primary context whichever thread the caller is on.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  /// For destructors: failures are ignored (and cleared) instead of thrown.
  DeviceGuard(int device, std::nothrow_t);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace pickle::device::cuda
