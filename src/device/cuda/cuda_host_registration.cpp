// cudaHostRegister of shared host memory: pinned, mapped into every device's address space (portable).
#include <cuda_runtime_api.h>

#include "core/format.hpp"
#include "core/log.hpp"
#include "device/backends.hpp"
#include "device/cuda/driver_api.hpp"

namespace pickle::device::cuda {
namespace {

class CudaHostRegistration final : public HostRegistration {
 public:
  CudaHostRegistration(void* ptr, std::size_t bytes, int device) : ptr_(ptr), device_(device) {
    OpContext ctx{.op = "cudaHostRegister of shared host memory", .bytes = bytes};
    require_device(device, ctx);
    DeviceGuard guard(device);
    PICKLE_CUDA(ctx, cudaHostRegister(ptr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
    void* mapped = nullptr;
    cudaError_t error = cudaHostGetDevicePointer(&mapped, ptr, 0);
    if (error != cudaSuccess) {
      cudaHostUnregister(ptr);
      PICKLE_CUDA(ctx, error);
    }
    offset_ = static_cast<char*>(mapped) - static_cast<char*>(ptr);
  }
  ~CudaHostRegistration() override {
    DeviceGuard guard(device_, std::nothrow);
    if (cudaHostUnregister(ptr_) != cudaSuccess) {
      PICKLE_LOG(Warn, "device", "cudaHostUnregister failed: " << cudaGetErrorString(cudaGetLastError()));
    }
  }
  void* device_address(void* host_ptr) const noexcept override { return static_cast<char*>(host_ptr) + offset_; }

 private:
  void* ptr_;
  int device_;
  std::ptrdiff_t offset_ = 0;  // 0 wherever the GPU can use host pointers directly (UVA), kept general
};

}  // namespace

std::unique_ptr<HostRegistration> register_host_memory(void* ptr, std::size_t bytes, int device) {
  return std::make_unique<CudaHostRegistration>(ptr, bytes, device);
}

}  // namespace pickle::device::cuda
