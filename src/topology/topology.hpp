#pragma once
// Facts about this host: CPU, memory, NUMA, GPUs, which GPU pairs can reach each other and over what link, and the
// versions of the driver and the optional libraries. One struct, filled once by discover(); printing is the caller's
// business (`pickle info`, the benchmark result files). Missing hardware or libraries are facts, not errors.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pickle::topology {

/// One NUMA node of the host (/sys/devices/system/node/nodeN).
struct NumaNode {
  int id = 0;
  std::string cpus;               ///< its CPU list as the kernel writes it, e.g. "0-55,112-167"
  std::uint64_t memory_bytes = 0;  ///< 0 when the kernel does not say
};

struct HostInfo {
  std::string hostname;
  std::string kernel;     ///< "Linux 6.1.0-18-amd64"
  std::string arch;       ///< "x86_64", "aarch64"
  std::string cpu_model;  ///< /proc/cpuinfo's model name (or what the architecture offers instead)
  int logical_cores = 0;  ///< online CPUs
  int cpus_allowed = 0;   ///< CPUs this process may run on (smaller in containers and under taskset)
  std::uint64_t memory_bytes = 0;  ///< MemTotal
  std::vector<NumaNode> numa_nodes;  ///< empty when the kernel exposes no NUMA information
};

/// One GPU as the CUDA runtime numbers it (after CUDA_VISIBLE_DEVICES).
struct Gpu {
  int index = 0;
  std::string name;
  int sm_count = 0;
  std::uint64_t memory_total_bytes = 0;
  std::optional<std::uint64_t> memory_free_bytes;  ///< unset when not asked for or when the GPU refused a context
  int cc_major = 0;
  int cc_minor = 0;
  int copy_engines = 0;     ///< asyncEngineCount: copies that can run concurrently with kernels and each other
  std::string pci_bus_id;   ///< "0000:18:00.0": lower-case hex as in /sys/bus/pci/devices
  int numa_node = -1;       ///< -1: unknown or a single-node host
  std::string uuid;         ///< "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it
};

/// How GPU i reaches GPU j.
enum class LinkType {
  Self,      ///< i == j
  NvLink,    ///< direct NVLink links between the two GPUs
  NvSwitch,  ///< both GPUs' NVLinks go to NVSwitches (every pair on the switch gets the full link count)
  Pcie,      ///< no NVLink, but CUDA peer access works (over the PCIe fabric)
  None,      ///< no NVLink and no peer access: data must go through host memory
  Unknown,   ///< NVML could not be used, so NVLink cannot be told from PCIe (Topology::nvml says why)
};

/// "self", "nvlink", "nvswitch", "pcie", "none", "unknown": the stable names used in JSON.
const char* link_type_name(LinkType type) noexcept;

struct Link {
  LinkType type = LinkType::None;
  int nvlinks = 0;   ///< NVLink links counted for NvLink / NvSwitch
  bool p2p = false;  ///< cudaDeviceCanAccessPeer(i, j)
  /// Short form for a matrix cell, as nvidia-smi topo -m: "X", "NV18", "PCIe", "none", "?".
  std::string label() const;
};

/// A library loaded at run time: its version when found, else why not.
struct LibraryVersion {
  bool found = false;
  std::string version;  ///< "2.21.5" when found
  std::string detail;   ///< the file that was loaded, or the loader's error
};

struct Versions {
  std::string pickle;      ///< this build, "0.1.0"
  std::string revision;    ///< the sources' commit, "3b34479d2a1c" ("-dirty" with local changes; "unknown")
  std::string build_type;  ///< CMAKE_BUILD_TYPE, "Release"
  int cuda_runtime = 0;    ///< cudaRuntimeGetVersion, e.g. 13000; 0 when built without CUDA
  int cuda_driver = 0;     ///< cudaDriverGetVersion: newest CUDA the driver supports; 0 when there is no driver
  std::string driver;      ///< NVML's driver version, "570.124.06"; empty when NVML is unavailable
  LibraryVersion nccl;     ///< libnccl.so.2, ncclGetVersion
  LibraryVersion libfabric;  ///< libfabric.so.1, fi_version
};

/// State of NVML, the source of NVLink facts and the driver version string.
struct NvmlStatus {
  bool available = false;
  std::string detail;  ///< the loaded file, or why NVML could not be used ("libnvidia-ml.so.1: cannot open ...")
};

struct Topology {
  HostInfo host;
  std::vector<Gpu> gpus;
  /// Why gpus is empty ("no NVIDIA driver (cudaErrorInsufficientDriver)"); empty when GPUs were found.
  std::string no_gpu_reason;
  /// links[i][j]: how GPU i reaches GPU j (gpus.size() squared; the diagonal is Self).
  std::vector<std::vector<Link>> links;
  NvmlStatus nvml;
  Versions versions;
};

struct DiscoverOptions {
  /// cudaMemGetInfo needs a context on every GPU (hundreds of MB each, and time): `pickle info` wants it, a
  /// benchmark rank that only records the topology does not.
  bool memory_free = true;
};

/// Looks at the host. Never throws for absent GPUs, drivers or libraries (they are reported in the result); leaves
/// the calling thread's current CUDA device as it found it. It initialises CUDA in the calling process: a launcher
/// that forks ranks must not call it before forking.
Topology discover(const DiscoverOptions& options = {});

/// 12040 -> "12.4" (the encoding of cudaRuntimeGetVersion / cudaDriverGetVersion); 0 -> "none".
std::string cuda_version_string(int version);

}  // namespace pickle::topology
