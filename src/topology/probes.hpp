#pragma once
// The pieces discover() puts together; each looks at one source (the kernel, the CUDA runtime, optional libraries).

#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace pickle::topology {

/// Host name, kernel, CPU, memory and NUMA nodes from uname, /proc and /sys.
HostInfo scan_host();

/// CPUs this process may run on (sched_getaffinity; 0 when the kernel does not say).
int cpus_allowed();

struct GpuScan {
  std::vector<Gpu> gpus;
  std::string no_gpu_reason;            ///< set when gpus is empty
  std::vector<std::vector<bool>> p2p;   ///< cudaDeviceCanAccessPeer(i, j)
  int cuda_runtime = 0;
  int cuda_driver = 0;
};

/// GPUs through the CUDA runtime. Never throws: a runtime failure becomes no_gpu_reason.
GpuScan scan_gpus(bool memory_free);

/// NCCL (libnccl.so.2) and libfabric (libfabric.so.1): loaded, asked for their version, unloaded.
LibraryVersion nccl_version();
LibraryVersion libfabric_version();

}  // namespace pickle::topology
