#include "device/cuda/driver_api.hpp"

#include <mutex>

#include "core/log.hpp"
#include "device/backends.hpp"

namespace pickle::device {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      cudaGetLastError();
      std::string detail = cat(cudaGetErrorName(error), ": ", cudaGetErrorString(error));
      if (error == cudaErrorInsufficientDriver) p.reason = cat("no NVIDIA driver (", detail, ")");
      else if (error == cudaErrorNoDevice) p.reason = cat("no CUDA-capable GPU (", detail, ")");
      else p.reason = cat("CUDA cannot be initialised (", detail, ")");
      return p;
    }
    p.count = count;
    if (count == 0) p.reason = "no CUDA-capable GPU (cudaGetDeviceCount found 0)";
    return p;
  }();
  return result;
}

}  // namespace

int cuda_device_count() noexcept { return probe().count; }

std::string cuda_unavailable_reason() { return probe().reason; }

namespace cuda {

const DriverApi& driver() {
  if (cuda_device_count() == 0) throw UnavailableError(cat("CUDA is unavailable: ", cuda_unavailable_reason()));
  static const DriverApi api = [] {
    DriverApi table;
#define PICKLE_DRIVER_LOAD(name, version)                                                                   \
  {                                                                                                         \
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;                            \
    void* fn = nullptr;                                                                                     \
    cudaError_t error = cudaGetDriverEntryPointByVersion(#name, &fn, version, cudaEnableDefault, &status); \
    if (error == cudaSuccess && status == cudaDriverEntryPointSuccess && fn != nullptr) {                   \
      table.name = reinterpret_cast<decltype(table.name)>(fn);                                              \
    } else {                                                                                                \
      cudaGetLastError();                                                                                   \
      PICKLE_LOG(Info, "device", "CUDA driver entry point " #name " (ABI " << version << ") is missing");   \
    }                                                                                                       \
  }
    PICKLE_DRIVER_ENTRY_POINTS(PICKLE_DRIVER_LOAD)
#undef PICKLE_DRIVER_LOAD
    return table;
  }();
  return api;
}

void require_device(int device, const OpContext& ctx) {
  int count = cuda_device_count();
  if (count == 0) throw UnavailableError(cat(describe(ctx), ": CUDA is unavailable: ", cuda_unavailable_reason()));
  if (device < 0 || device >= count) {
    throw InvalidArgument(cat(describe(ctx), ": device ", device, " does not exist (", count, " visible)"));
  }
}

std::string driver_error_text(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  // No recursion into driver(): it throws when CUDA is unavailable, and this runs while reporting an error.
  static const DriverApi* api = [] {
    try {
      return &driver();
    } catch (...) {
      return static_cast<const DriverApi*>(nullptr);
    }
  }();
  if (api != nullptr && api->cuGetErrorName != nullptr) api->cuGetErrorName(result, &name);
  if (api != nullptr && api->cuGetErrorString != nullptr) api->cuGetErrorString(result, &text);
  return cat(name != nullptr ? name : "CUresult", " ", static_cast<int>(result), " (",
             text != nullptr ? text : "no description", ")");
}

void throw_driver_error(CUresult result, const char* call, const OpContext& ctx) {
  throw CudaError(cat(describe(ctx), ": ", call, " failed: ", driver_error_text(result)), static_cast<int>(result));
}

void throw_runtime_error(cudaError_t error, const char* call, const OpContext& ctx) {
  cudaGetLastError();
  throw CudaError(cat(describe(ctx), ": ", call, " failed: ", cudaGetErrorName(error), " (",
                      cudaGetErrorString(error), ")"),
                  static_cast<int>(error));
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    cudaGetLastError();
    previous_ = -1;
  }
  // Always set, even when it is already the current device: cudaSetDevice also binds the device's primary context to
  // this thread, which driver calls made from a fresh thread need.
  PICKLE_CUDA((OpContext{.op = "select CUDA device"}), cudaSetDevice(device));
  changed_ = previous_ >= 0 && previous_ != device;
}

DeviceGuard::DeviceGuard(int device, std::nothrow_t) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
  changed_ = previous_ >= 0 && previous_ != device;
}

DeviceGuard::~DeviceGuard() {
  if (changed_ && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

}  // namespace cuda
}  // namespace pickle::device
