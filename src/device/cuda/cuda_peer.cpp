// Which GPUs a rank's copy engines can reach: the question behind the choice between the ipc transport (write
// straight into the peer's GPU memory) and the shm transport (stage through host memory). Ranks may see different
// CUDA_VISIBLE_DEVICES, so the peer's GPU is named by its PCI bus id, not by an ordinal.
#include <cuda_runtime_api.h>

#include "device/backends.hpp"
#include "device/cuda/driver_api.hpp"

namespace pickle::device {

std::string cuda_pci_bus_id(int device) {
  OpContext ctx{.op = "cudaDeviceGetPCIBusId"};
  cuda::require_device(device, ctx);
  char id[32] = {};
  PICKLE_CUDA(ctx, cudaDeviceGetPCIBusId(id, sizeof id, device));
  return id;
}

bool cuda_peer_reachable(int device, const std::string& peer_bus_id, std::string& why) {
  OpContext ctx{.op = "peer access query"};
  cuda::require_device(device, ctx);
  int peer = -1;
  if (cudaDeviceGetByPCIBusId(&peer, peer_bus_id.c_str()) != cudaSuccess) {
    cudaGetLastError();
    why = cat("the peer's GPU ", peer_bus_id, " is not visible to this process (CUDA_VISIBLE_DEVICES)");
    return false;
  }
  if (peer == device) return true;
  int can = 0;
  PICKLE_CUDA(ctx, cudaDeviceCanAccessPeer(&can, device, peer));
  if (can == 0) why = cat("CUDA has no peer access from GPU ", device, " to GPU ", peer, " (", peer_bus_id, ")");
  return can != 0;
}

}  // namespace pickle::device
