#pragma once
// NVLink accounting, kept free of NVML so that it can be tested with a made-up table: given every active NVLink of
// every GPU and what sits at its far end, how many links join each GPU pair, directly or through NVSwitches.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/topology.hpp"

namespace pickle::topology {

/// A PCI function address. CUDA writes "0000:18:00.0", NVML "00000000:18:00.0": compare parsed values, not text.
struct PciAddress {
  std::uint32_t domain = 0;
  std::uint32_t bus = 0;
  std::uint32_t device = 0;
  std::uint32_t function = 0;
  friend bool operator==(const PciAddress&, const PciAddress&) = default;
  /// Same slot, any function: NVML's remote info carries no function number, and a GPU is function 0 anyway.
  bool same_device(const PciAddress& other) const {
    return domain == other.domain && bus == other.bus && device == other.device;
  }
};

/// Parses "domain:bus:device.function" (hex, any case, domain of up to 8 digits) or "bus:device.function".
std::optional<PciAddress> parse_pci_address(std::string_view text);
/// "0000:18:00.0", the form of /sys/bus/pci/devices.
std::string to_string(const PciAddress& address);

/// What NVML says is at the far end of a link (nvmlDeviceGetNvLinkRemoteDeviceType where the driver has it).
enum class RemoteKind { Gpu, Switch, Cpu, Unknown };

/// One active NVLink of GPU `gpu` (an index into the GPU list).
struct ActiveLink {
  int gpu = 0;
  unsigned link = 0;
  RemoteKind remote_kind = RemoteKind::Unknown;
  std::optional<PciAddress> remote;  ///< the far end's PCI address, when NVML could tell
};

/// Link count between each pair of GPUs: result[i][j] has type NvLink (direct links of i whose far end is j),
/// NvSwitch (i and j both have links to switches: min of the two counts, as every switch port reaches every GPU),
/// or None; the diagonal is Self. A far end that is neither a listed GPU nor known to be a GPU or CPU is taken for an
/// NVSwitch, as NCCL does: switches are often not visible as PCI devices (always so inside VMs).
/// p2p is left false: peer access is the CUDA runtime's answer, filled in by the caller.
std::vector<std::vector<Link>> count_nvlinks(const std::vector<PciAddress>& gpus,
                                             const std::vector<ActiveLink>& links);

}  // namespace pickle::topology
