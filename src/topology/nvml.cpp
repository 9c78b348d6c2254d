#include "topology/nvml.hpp"

#include <optional>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/log.hpp"
#include "topology/nvml_library.hpp"
#include "topology/probes.hpp"

namespace pickle::topology {
namespace {

// The slice of nvml.h that the scan uses beyond nvml_library.hpp's (stable ABI values and layouts).
using nvml::Return;
using nvml::kSuccess;
using nvmlEnableState_t = int;
constexpr nvmlEnableState_t NVML_FEATURE_ENABLED = 1;
using nvmlIntNvLinkDeviceType_t = int;
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU = 0x00;
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01;
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02;
// NVML_NVLINK_MAX_LINKS: 18 from Hopper on (and Blackwell); older GPUs answer "not supported" beyond their count.
constexpr unsigned kMaxNvLinks = 18;
constexpr unsigned kDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

/// The library and the entry points the scan calls.
class Nvml {
 public:
  Nvml()
      : library_(nvml::Library::open()),
        link_state_(library_->symbol<Return(nvml::Device, unsigned, nvmlEnableState_t*)>("nvmlDeviceGetNvLinkState")),
        remote_pci_(library_->symbol<Return(nvml::Device, unsigned, nvmlPciInfo_t*)>(
            "nvmlDeviceGetNvLinkRemotePciInfo_v2")),
        driver_version_(library_->symbol<Return(char*, unsigned)>("nvmlSystemGetDriverVersion")),
        // Newer drivers only: tells an NVSwitch port from a GPU where the switch has no visible PCI address.
        remote_type_(library_->find<Return(nvml::Device, unsigned, nvmlIntNvLinkDeviceType_t*)>(
            "nvmlDeviceGetNvLinkRemoteDeviceType")) {}

  std::string path() const { return library_->path(); }
  std::string error(Return result) const { return library_->error(result); }

  std::string driver_version() const {
    char text[kDriverVersionBufferSize] = {};
    Return result = driver_version_(text, sizeof text);
    if (result != kSuccess) {
      PICKLE_LOG(Warn, "topology", "nvmlSystemGetDriverVersion failed: " << error(result));
      return "";
    }
    return text;
  }

  /// Appends GPU `index`'s active links; a GPU NVML cannot find is logged and skipped.
  void collect_links(int index, const PciAddress& address, std::vector<ActiveLink>& out) const {
    nvml::Device device = nullptr;
    try {
      device = library_->device(to_string(address));
    } catch (const Error& e) {
      PICKLE_LOG(Warn, "topology", e.message());
      return;
    }
    for (unsigned link = 0; link < kMaxNvLinks; ++link) {
      nvmlEnableState_t active = 0;
      if (link_state_(device, link, &active) != kSuccess || active != NVML_FEATURE_ENABLED) continue;
      ActiveLink record{.gpu = index, .link = link, .remote_kind = remote_kind(device, link), .remote = {}};
      if (record.remote_kind != RemoteKind::Switch) {
        nvmlPciInfo_t pci{};
        Return result = remote_pci_(device, link, &pci);
        if (result == kSuccess) {
          record.remote = PciAddress{.domain = pci.domain, .bus = pci.bus, .device = pci.device, .function = 0};
        } else {
          PICKLE_LOG(Debug, "topology", "GPU " << index << " NVLink " << link << ": no remote PCI info: "
                                                << error(result));
        }
      }
      out.push_back(record);
    }
  }

 private:
  RemoteKind remote_kind(nvml::Device device, unsigned link) const {
    if (remote_type_ == nullptr) return RemoteKind::Unknown;
    nvmlIntNvLinkDeviceType_t type = -1;
    if (remote_type_(device, link, &type) != kSuccess) return RemoteKind::Unknown;
    switch (type) {
      case NVML_NVLINK_DEVICE_TYPE_GPU: return RemoteKind::Gpu;
      case NVML_NVLINK_DEVICE_TYPE_IBMNPU: return RemoteKind::Cpu;
      case NVML_NVLINK_DEVICE_TYPE_SWITCH: return RemoteKind::Switch;
      default: return RemoteKind::Unknown;
    }
  }

  std::unique_ptr<nvml::Library> library_;
  Return (*link_state_)(nvml::Device, unsigned, nvmlEnableState_t*);
  Return (*remote_pci_)(nvml::Device, unsigned, nvmlPciInfo_t*);
  Return (*driver_version_)(char*, unsigned);
  Return (*remote_type_)(nvml::Device, unsigned, nvmlIntNvLinkDeviceType_t*);
};

}  // namespace

NvmlScan scan_nvml(const std::vector<PciAddress>& gpus) {
  NvmlScan scan;
  try {
    Nvml nvml;
    scan.status.available = true;
    scan.status.detail = nvml.path();
    scan.driver_version = nvml.driver_version();
    for (std::size_t i = 0; i < gpus.size(); ++i) nvml.collect_links(static_cast<int>(i), gpus[i], scan.links);
  } catch (const Error& e) {
    // No library, one too old for the _v2 entry points, or a driver that NVML cannot talk to.
    scan.status.available = false;
    scan.status.detail = e.message();
    scan.links.clear();
  }
  return scan;
}

}  // namespace pickle::topology
