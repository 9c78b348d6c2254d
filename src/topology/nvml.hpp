#pragma once
// NVML, loaded with dlopen (the toolkit ships no nvml.h here, and machines without a driver have no library): the
// active NVLinks of each GPU and the driver version string.

#include <string>
#include <vector>

#include "topology/nvlink.hpp"
#include "topology/topology.hpp"

namespace pickle::topology {

struct NvmlScan {
  NvmlStatus status;
  std::string driver_version;     ///< empty when unavailable
  std::vector<ActiveLink> links;  ///< active NVLinks of the GPUs asked about
};

/// Loads libnvidia-ml.so.1, initialises it, lists the active NVLinks of `gpus` (by PCI address, so that the indices
/// match the CUDA runtime's whatever CUDA_VISIBLE_DEVICES says) and shuts it down again. Never throws: a missing or
/// failing NVML is reported in status.
NvmlScan scan_nvml(const std::vector<PciAddress>& gpus);

}  // namespace pickle::topology
