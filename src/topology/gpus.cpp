// GPUs through the CUDA runtime (linked statically: without a driver, calls return cudaErrorInsufficientDriver
// instead of the program failing to start).
#include <cctype>
#include <cstdio>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "topology/probes.hpp"
#include "topology/sysfs.hpp"

#if PICKLE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pickle::topology {

#if PICKLE_HAVE_CUDA
namespace {

std::string error_text(cudaError_t error) {
  return cat(cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
}

/// Throws CudaError naming the GPU and the call; scan_gpus turns it into no_gpu_reason.
void check(cudaError_t error, const char* call, int device) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // clear it, so that later calls by this process do not see it again
  throw CudaError(cat(call, " for GPU ", device, " failed: ", error_text(error)), static_cast<int>(error));
}

/// Why cudaGetDeviceCount found nothing, in words a user can act on.
std::string no_gpu_reason(cudaError_t error, int driver_version, int runtime_version) {
  switch (error) {
    case cudaErrorInsufficientDriver:
      if (driver_version == 0) return "no NVIDIA driver (cudaErrorInsufficientDriver)";
      return cat("the NVIDIA driver supports CUDA up to ", cuda_version_string(driver_version),
                 ", older than this build's runtime ", cuda_version_string(runtime_version),
                 " (cudaErrorInsufficientDriver)");
    case cudaErrorNoDevice: {
      std::string reason = "no CUDA device (cudaErrorNoDevice)";
      if (auto visible = env::foreign("CUDA_VISIBLE_DEVICES")) reason += cat("; CUDA_VISIBLE_DEVICES=", *visible);
      return reason;
    }
    default: return error_text(error);
  }
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string format_uuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
                b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

Gpu describe_gpu(int device, bool memory_free) {
  Gpu gpu;
  gpu.index = device;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", device);
  gpu.name = prop.name;
  gpu.sm_count = prop.multiProcessorCount;
  gpu.memory_total_bytes = prop.totalGlobalMem;
  gpu.cc_major = prop.major;
  gpu.cc_minor = prop.minor;
  gpu.copy_engines = prop.asyncEngineCount;
  gpu.uuid = format_uuid(prop.uuid);

  char bus_id[32] = {};
  check(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device), "cudaDeviceGetPCIBusId", device);
  gpu.pci_bus_id = lower(bus_id);  // sysfs spells it in lower case
  if (auto node = read_integer_file(cat("/sys/bus/pci/devices/", gpu.pci_bus_id, "/numa_node"))) {
    gpu.numa_node = static_cast<int>(*node);
  }

  if (memory_free) {
    // cudaMemGetInfo answers for the current device and creates its primary context: a GPU in exclusive-process mode
    // that another process holds refuses, which is worth a warning, not a failure of the whole scan.
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaSetDevice(device), "cudaSetDevice", device);
    cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes);
    if (error == cudaSuccess) {
      gpu.memory_free_bytes = free_bytes;
    } else {
      cudaGetLastError();
      PICKLE_LOG(Warn, "topology", "cudaMemGetInfo for GPU " << device << " failed: " << error_text(error));
    }
  }
  return gpu;
}

}  // namespace

GpuScan scan_gpus(bool memory_free) {
  GpuScan scan;
  cudaRuntimeGetVersion(&scan.cuda_runtime);
  cudaDriverGetVersion(&scan.cuda_driver);  // 0 without a driver, and still cudaSuccess

  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    scan.no_gpu_reason = no_gpu_reason(error, scan.cuda_driver, scan.cuda_runtime);
    return scan;
  }
  if (count == 0) {
    scan.no_gpu_reason = "no CUDA device";
    return scan;
  }

  int original_device = 0;
  cudaGetDevice(&original_device);
  try {
    for (int device = 0; device < count; ++device) scan.gpus.push_back(describe_gpu(device, memory_free));
    scan.p2p.assign(static_cast<std::size_t>(count), std::vector<bool>(static_cast<std::size_t>(count), false));
    for (int i = 0; i < count; ++i) {
      for (int j = 0; j < count; ++j) {
        if (i == j) continue;
        int can = 0;
        check(cudaDeviceCanAccessPeer(&can, i, j), "cudaDeviceCanAccessPeer", i);
        scan.p2p[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = can != 0;
      }
    }
  } catch (const CudaError& e) {
    // One broken GPU (fallen off the bus, ECC-disabled) must not hide the rest of the report.
    scan.gpus.clear();
    scan.p2p.clear();
    scan.no_gpu_reason = e.message();
  }
  // Only when we moved it: since CUDA 12, cudaSetDevice creates the primary context, which a caller that asked for
  // no memory query does not want.
  if (memory_free) cudaSetDevice(original_device);
  return scan;
}

#else  // built without the CUDA toolkit

GpuScan scan_gpus(bool /*memory_free*/) {
  GpuScan scan;
  scan.no_gpu_reason = "pickle was built without CUDA";
  return scan;
}

#endif

}  // namespace pickle::topology
