#include "topology/nvml.hpp"

#include <optional>

#include <pickle/error.hpp>

#include "core/dynlib.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "topology/probes.hpp"

namespace pickle::topology {
namespace {

// The slice of nvml.h that pickle uses, declared here because the build machines have no nvml.h. These layouts and
// values are part of NVML's stable ABI (the _v2 entry points exist since driver 400-series).
using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
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

/// The loaded library and the entry points pickle calls; nvmlShutdown on destruction.
class Nvml {
 public:
  explicit Nvml(DynamicLibrary library)
      : library_(std::move(library)),
        init_(library_.symbol<nvmlReturn_t()>("nvmlInit_v2")),
        shutdown_(library_.symbol<nvmlReturn_t()>("nvmlShutdown")),
        error_string_(library_.symbol<const char*(nvmlReturn_t)>("nvmlErrorString")),
        handle_by_bus_id_(
            library_.symbol<nvmlReturn_t(const char*, nvmlDevice_t*)>("nvmlDeviceGetHandleByPciBusId_v2")),
        link_state_(library_.symbol<nvmlReturn_t(nvmlDevice_t, unsigned, nvmlEnableState_t*)>(
            "nvmlDeviceGetNvLinkState")),
        remote_pci_(library_.symbol<nvmlReturn_t(nvmlDevice_t, unsigned, nvmlPciInfo_t*)>(
            "nvmlDeviceGetNvLinkRemotePciInfo_v2")),
        driver_version_(library_.symbol<nvmlReturn_t(char*, unsigned)>("nvmlSystemGetDriverVersion")),
        // Newer drivers only: tells an NVSwitch port from a GPU where the switch has no visible PCI address.
        remote_type_(library_.find<nvmlReturn_t(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t*)>(
            "nvmlDeviceGetNvLinkRemoteDeviceType")) {
    nvmlReturn_t result = init_();
    if (result != NVML_SUCCESS) throw UnavailableError(cat("nvmlInit_v2 failed: ", error(result)));
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml() { shutdown_(); }

  std::string path() const { return library_.path(); }

  std::string error(nvmlReturn_t result) const {
    const char* text = error_string_(result);
    return cat(text != nullptr ? text : "unknown NVML error", " (", result, ")");
  }

  std::string driver_version() const {
    char text[kDriverVersionBufferSize] = {};
    nvmlReturn_t result = driver_version_(text, sizeof text);
    if (result != NVML_SUCCESS) {
      PICKLE_LOG(Warn, "topology", "nvmlSystemGetDriverVersion failed: " << error(result));
      return "";
    }
    return text;
  }

  /// Appends GPU `index`'s active links; a GPU NVML cannot find is logged and skipped.
  void collect_links(int index, const PciAddress& address, std::vector<ActiveLink>& out) const {
    nvmlDevice_t device = nullptr;
    std::string bus_id = to_string(address);
    nvmlReturn_t result = handle_by_bus_id_(bus_id.c_str(), &device);
    if (result != NVML_SUCCESS) {
      PICKLE_LOG(Warn, "topology", "NVML has no GPU at " << bus_id << ": " << error(result));
      return;
    }
    for (unsigned link = 0; link < kMaxNvLinks; ++link) {
      nvmlEnableState_t active = 0;
      if (link_state_(device, link, &active) != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
      ActiveLink record{.gpu = index, .link = link, .remote_kind = remote_kind(device, link), .remote = {}};
      if (record.remote_kind != RemoteKind::Switch) {
        nvmlPciInfo_t pci{};
        result = remote_pci_(device, link, &pci);
        if (result == NVML_SUCCESS) {
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
  RemoteKind remote_kind(nvmlDevice_t device, unsigned link) const {
    if (remote_type_ == nullptr) return RemoteKind::Unknown;
    nvmlIntNvLinkDeviceType_t type = -1;
    if (remote_type_(device, link, &type) != NVML_SUCCESS) return RemoteKind::Unknown;
    switch (type) {
      case NVML_NVLINK_DEVICE_TYPE_GPU: return RemoteKind::Gpu;
      case NVML_NVLINK_DEVICE_TYPE_IBMNPU: return RemoteKind::Cpu;
      case NVML_NVLINK_DEVICE_TYPE_SWITCH: return RemoteKind::Switch;
      default: return RemoteKind::Unknown;
    }
  }

  DynamicLibrary library_;
  nvmlReturn_t (*init_)();
  nvmlReturn_t (*shutdown_)();
  const char* (*error_string_)(nvmlReturn_t);
  nvmlReturn_t (*handle_by_bus_id_)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*link_state_)(nvmlDevice_t, unsigned, nvmlEnableState_t*);
  nvmlReturn_t (*remote_pci_)(nvmlDevice_t, unsigned, nvmlPciInfo_t*);
  nvmlReturn_t (*driver_version_)(char*, unsigned);
  nvmlReturn_t (*remote_type_)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t*);
};

}  // namespace

NvmlScan scan_nvml(const std::vector<PciAddress>& gpus) {
  NvmlScan scan;
  std::string error;
  auto library = DynamicLibrary::try_open("libnvidia-ml.so.1", &error);
  if (!library) {
    scan.status.detail = error;
    return scan;
  }
  try {
    Nvml nvml(std::move(*library));
    scan.status.available = true;
    scan.status.detail = nvml.path();
    scan.driver_version = nvml.driver_version();
    for (std::size_t i = 0; i < gpus.size(); ++i) nvml.collect_links(static_cast<int>(i), gpus[i], scan.links);
  } catch (const Error& e) {
    // A library too old for the _v2 entry points, or a driver that NVML cannot talk to.
    scan.status.available = false;
    scan.status.detail = plain_message(e);
    scan.links.clear();
  }
  return scan;
}

}  // namespace pickle::topology
