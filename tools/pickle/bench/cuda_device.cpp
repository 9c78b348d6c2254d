#include "cuda_device.hpp"

#include <pickle/error.hpp>

#include "comm/host_identity.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"

#if PICKLE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pickle::bench {

int rank_device(int local_rank) {
  const int gpus = device::cuda_device_count();
  return gpus > 0 ? local_rank % gpus : 0;
}

std::string nccl_gpu_sharing_problem(int local_ranks, std::string_view cause) {
  const int gpus = device::cuda_device_count();
  if (gpus >= local_ranks) return {};
  return cat(local_ranks, " ranks share ", gpus, " GPU(s) (", cause, "): NCCL needs a GPU per rank");
}

std::string gpu_identity(int device) { return cat(comm::host_identity(), " ", device::cuda_pci_bus_id(device)); }

std::string shared_gpu_note(const std::vector<std::string>& identities) {
  for (std::size_t a = 0; a < identities.size(); ++a) {
    if (identities[a].empty()) continue;
    for (std::size_t b = a + 1; b < identities.size(); ++b) {
      if (identities[b] != identities[a]) continue;
      return cat("ranks ", a, " and ", b, " share one GPU (", identities[a].substr(identities[a].rfind(' ') + 1),
                 "): their transfers are copies inside that GPU by processes taking turns on it, so these times "
                 "measure no link: a functional run, not a figure");
    }
  }
  return {};
}

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
