#include "topology/topology.hpp"

#include <pickle/error.hpp>
#include <pickle/source_revision.hpp>
#include <pickle/version.hpp>

#include "core/format.hpp"
#include "topology/nvlink.hpp"
#include "topology/nvml.hpp"
#include "topology/probes.hpp"

namespace pickle::topology {

const char* link_type_name(LinkType type) noexcept {
  switch (type) {
    case LinkType::Self: return "self";
    case LinkType::NvLink: return "nvlink";
    case LinkType::NvSwitch: return "nvswitch";
    case LinkType::Pcie: return "pcie";
    case LinkType::None: return "none";
    case LinkType::Unknown: return "unknown";
  }
  return "unknown";
}

std::string Link::label() const {
  switch (type) {
    case LinkType::Self: return "X";
    case LinkType::NvLink:
    case LinkType::NvSwitch: return cat("NV", nvlinks);
    case LinkType::Pcie: return "PCIe";
    case LinkType::None: return "none";
    case LinkType::Unknown: return "?";
  }
  return "?";
}

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return cat(version / 1000, ".", (version % 1000) / 10);
}

Topology discover(const DiscoverOptions& options) {
  Topology topology;
  topology.host = scan_host();

  GpuScan gpus = scan_gpus(options.memory_free);
  topology.gpus = std::move(gpus.gpus);
  topology.no_gpu_reason = std::move(gpus.no_gpu_reason);
  topology.versions.cuda_runtime = gpus.cuda_runtime;
  topology.versions.cuda_driver = gpus.cuda_driver;

  std::vector<PciAddress> addresses;
  for (const auto& gpu : topology.gpus) {
    auto address = parse_pci_address(gpu.pci_bus_id);
    addresses.push_back(address.value_or(PciAddress{}));
  }
  NvmlScan nvml = scan_nvml(addresses);
  topology.nvml = nvml.status;
  topology.versions.driver = nvml.driver_version;

  // NVML decides NVLink vs not; the CUDA runtime decides whether peer access works at all.
  topology.links = count_nvlinks(addresses, nvml.links);
  for (std::size_t i = 0; i < topology.links.size(); ++i) {
    for (std::size_t j = 0; j < topology.links.size(); ++j) {
      Link& link = topology.links[i][j];
      if (i == j) continue;
      link.p2p = gpus.p2p[i][j];
      if (link.type != LinkType::None) continue;
      if (!topology.nvml.available) link.type = LinkType::Unknown;
      else if (link.p2p) link.type = LinkType::Pcie;
    }
  }

  topology.versions.pickle = PICKLE_VERSION_STRING;
  topology.versions.revision = PICKLE_SOURCE_REVISION;
  topology.versions.build_type = PICKLE_BUILD_TYPE;
  topology.versions.nccl = nccl_version();
  topology.versions.libfabric = libfabric_version();
  return topology;
}

}  // namespace pickle::topology
