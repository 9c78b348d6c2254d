// `pickle info [--json]`: what this host offers pickle (CPU, GPUs, links between them, library versions), as a report
// for people or as one JSON object for programs (keys in docs/info.md). No GPU is a fact to report, not a failure.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/format.hpp"
#include "core/json.hpp"
#include "info_transports.hpp"
#include "topology/topology.hpp"
#include "topology/topology_json.hpp"

namespace pickle::cli {
namespace {

using topology::LinkType;
using topology::Topology;

/// Bumped when a key of `pickle info --json` changes meaning or disappears (adding keys keeps the version).
constexpr const char* kInfoSchema = "pickle-info/1";

void info_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: pickle info [--json]\n\n"
               "Describes this host: CPU, memory, NUMA nodes, GPUs, the link between each GPU pair (NVLink count,\n"
               "PCIe, none), the transport pickle picks for each pair (PICKLE_TRANSPORT forces one) and the\n"
               "versions of the driver, CUDA, NCCL and libfabric.\n\n"
               "  --json   print the same facts as one JSON object (keys documented in docs/info.md)\n");
}

/// Prints rows as left-aligned columns, two spaces apart, indented by two.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = " ";
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += ' ';
      line += row[c];
      if (c + 1 < row.size()) line.append(widths[c] - row[c].size() + 1, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

void print_host(const Topology& topo) {
  const auto& host = topo.host;
  std::printf("Host\n");
  std::vector<std::vector<std::string>> rows = {
      {"hostname", host.hostname},
      {"kernel", cat(host.kernel, " (", host.arch, ")")},
      {"cpu", cat(host.cpu_model, ", ", host.logical_cores, " logical cores (", host.cpus_allowed,
                  " allowed to this process)")},
      {"memory", human_bytes(host.memory_bytes)},
  };
  if (host.numa_nodes.empty()) {
    rows.push_back({"numa", "no NUMA information in /sys"});
  } else {
    for (const auto& node : host.numa_nodes) {
      rows.push_back({node.id == host.numa_nodes.front().id ? "numa" : "",
                      cat("node ", node.id, ": cpus ", node.cpus, ", ", human_bytes(node.memory_bytes))});
    }
  }
  print_table(rows);
}

void print_gpus(const Topology& topo) {
  std::printf("\nGPUs\n");
  if (topo.gpus.empty()) {
    std::printf("  no GPU: %s\n", topo.no_gpu_reason.c_str());
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "name", "SMs", "memory", "free", "cc", "copy engines", "PCI bus id", "NUMA", "UUID"}};
  for (const auto& gpu : topo.gpus) {
    rows.push_back({std::to_string(gpu.index), gpu.name, std::to_string(gpu.sm_count),
                    human_bytes(gpu.memory_total_bytes),
                    gpu.memory_free_bytes ? human_bytes(*gpu.memory_free_bytes) : "?",
                    cat(gpu.cc_major, ".", gpu.cc_minor), std::to_string(gpu.copy_engines), gpu.pci_bus_id,
                    gpu.numa_node >= 0 ? std::to_string(gpu.numa_node) : "-", gpu.uuid});
  }
  print_table(rows);
}

void print_links(const Topology& topo) {
  if (topo.gpus.size() < 2) return;
  std::printf("\nGPU links\n");
  const std::size_t n = topo.gpus.size();
  bool seen[6] = {};  // by LinkType
  bool any_without_p2p = false;
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>{""});
  for (std::size_t j = 0; j < n; ++j) rows[0].push_back(cat("GPU", j));
  for (std::size_t i = 0; i < n; ++i) {
    rows.push_back({cat("GPU", i)});
    for (std::size_t j = 0; j < n; ++j) {
      const auto& link = topo.links[i][j];
      seen[static_cast<int>(link.type)] = true;
      // A link that should carry peer traffic but CUDA refuses peer access (a VM, a disabled driver option) is marked.
      bool missing_p2p = i != j && !link.p2p && link.type != LinkType::None;
      any_without_p2p = any_without_p2p || missing_p2p;
      rows.back().push_back(link.label() + (missing_p2p ? "*" : ""));
    }
  }
  print_table(rows);
  std::printf("\n");
  if (seen[static_cast<int>(LinkType::NvLink)]) std::printf("  NV# = # NVLink links joining the two GPUs directly\n");
  if (seen[static_cast<int>(LinkType::NvSwitch)]) {
    std::printf("  NV# = # NVLink links of each GPU into the NVSwitch fabric that joins them\n");
  }
  if (seen[static_cast<int>(LinkType::Pcie)]) std::printf("  PCIe = no NVLink; CUDA peer access over PCIe\n");
  if (seen[static_cast<int>(LinkType::None)]) std::printf("  none = no NVLink and no CUDA peer access\n");
  if (seen[static_cast<int>(LinkType::Unknown)]) {
    std::printf("  ? = unknown (NVML not found: %s)\n", topo.nvml.detail.c_str());
  }
  if (any_without_p2p) std::printf("  * = CUDA peer access is not available for this pair\n");
}

void print_transports(const Topology& topo) {
  std::printf("\nTransports (what a communicator of these %s would use)\n", topo.gpus.empty() ? "ranks" : "GPUs");
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : pair_transports(topo)) rows.push_back({p.pair, p.transport, p.reason});
  print_table(rows);
}

std::string library_line(const topology::LibraryVersion& library) {
  if (library.found) return cat(library.version, " (", library.detail, ")");
  return cat("not found (", library.detail, ")");
}

void print_versions(const Topology& topo) {
  const auto& v = topo.versions;
  std::printf("\nVersions\n");
  std::string driver;
  if (v.cuda_driver == 0) {
    driver = "none";
  } else {
    driver = cat(v.driver.empty() ? std::string("?") : v.driver, " (supports CUDA ",
                 topology::cuda_version_string(v.cuda_driver), ")");
  }
  print_table({
      {"pickle", cat(v.pickle, " (", v.revision, v.build_type.empty() ? "" : ", ", v.build_type, ")")},
      {"driver", driver},
      {"cuda runtime", topology::cuda_version_string(v.cuda_runtime)},
      {"nvml", topo.nvml.available ? topo.nvml.detail : cat("not found (", topo.nvml.detail, ")")},
      {"nccl", library_line(v.nccl)},
      {"libfabric", library_line(v.libfabric)},
  });
}

}  // namespace

int cmd_info(const Args& args) {
  bool as_json = false;
  for (const auto& arg : args) {
    if (arg == "--json") {
      as_json = true;
    } else if (arg == "--help" || arg == "-h") {
      info_usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "pickle info: unknown option '%s'\n\n", arg.c_str());
      info_usage(stderr);
      return 2;
    }
  }

  Topology topo = topology::discover();
  if (as_json) {
    json::Value out = json::Value::object();
    out["schema"] = kInfoSchema;
    json::Value facts = topology::to_json(topo);
    for (auto& member : facts.as_object()) out[member.key] = std::move(member.value);
    out["transports"] = pair_transports_json(pair_transports(topo));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("pickle %s on %s\n\n", topo.versions.pickle.c_str(), topo.host.hostname.c_str());
  print_host(topo);
  print_gpus(topo);
  print_links(topo);
  print_transports(topo);
  print_versions(topo);
  return 0;
}

}  // namespace pickle::cli
