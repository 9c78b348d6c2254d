#include "topology/topology_json.hpp"

namespace pickle::topology {
namespace {

json::Value optional_string(const std::string& text) { return text.empty() ? json::Value() : json::Value(text); }

json::Value host_json(const HostInfo& host) {
  json::Value out = json::Value::object();
  out["hostname"] = host.hostname;
  out["kernel"] = host.kernel;
  out["arch"] = host.arch;
  out["cpu_model"] = host.cpu_model;
  out["logical_cores"] = host.logical_cores;
  out["cpus_allowed"] = host.cpus_allowed;
  out["memory_bytes"] = host.memory_bytes;
  json::Value nodes = json::Value::array();
  for (const auto& node : host.numa_nodes) {
    json::Value entry = json::Value::object();
    entry["id"] = node.id;
    entry["cpus"] = node.cpus;
    entry["memory_bytes"] = node.memory_bytes;
    nodes.push_back(std::move(entry));
  }
  out["numa_nodes"] = std::move(nodes);
  return out;
}

json::Value gpu_json(const Gpu& gpu) {
  json::Value out = json::Value::object();
  out["index"] = gpu.index;
  out["name"] = gpu.name;
  out["uuid"] = gpu.uuid;
  out["pci_bus_id"] = gpu.pci_bus_id;
  out["numa_node"] = gpu.numa_node >= 0 ? json::Value(gpu.numa_node) : json::Value();
  out["compute_capability"] = std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor);
  out["sm_count"] = gpu.sm_count;
  out["copy_engines"] = gpu.copy_engines;
  out["memory_total_bytes"] = gpu.memory_total_bytes;
  out["memory_free_bytes"] = gpu.memory_free_bytes ? json::Value(*gpu.memory_free_bytes) : json::Value();
  return out;
}

json::Value library_json(const LibraryVersion& library) {
  json::Value out = json::Value::object();
  out["found"] = library.found;
  out["version"] = optional_string(library.version);
  out["detail"] = library.detail;
  return out;
}

}  // namespace

json::Value to_json(const Topology& topology) {
  json::Value out = json::Value::object();
  out["host"] = host_json(topology.host);

  json::Value gpus = json::Value::array();
  for (const auto& gpu : topology.gpus) gpus.push_back(gpu_json(gpu));
  out["gpus"] = std::move(gpus);
  out["no_gpu_reason"] = optional_string(topology.no_gpu_reason);

  json::Value links = json::Value::array();
  for (std::size_t i = 0; i < topology.links.size(); ++i) {
    for (std::size_t j = 0; j < topology.links[i].size(); ++j) {
      if (i == j) continue;
      const Link& link = topology.links[i][j];
      json::Value entry = json::Value::object();
      entry["from"] = i;
      entry["to"] = j;
      entry["type"] = link_type_name(link.type);
      entry["nvlinks"] = link.nvlinks;
      entry["p2p"] = link.p2p;
      entry["label"] = link.label();
      links.push_back(std::move(entry));
    }
  }
  out["links"] = std::move(links);

  json::Value nvml = json::Value::object();
  nvml["available"] = topology.nvml.available;
  nvml["detail"] = topology.nvml.detail;
  out["nvml"] = std::move(nvml);

  const Versions& v = topology.versions;
  json::Value versions = json::Value::object();
  versions["pickle"] = v.pickle;
  versions["pickle_revision"] = v.revision;
  versions["pickle_build_type"] = v.build_type;
  versions["cuda_runtime"] = v.cuda_runtime > 0 ? json::Value(cuda_version_string(v.cuda_runtime)) : json::Value();
  versions["cuda_driver"] = v.cuda_driver > 0 ? json::Value(cuda_version_string(v.cuda_driver)) : json::Value();
  versions["driver"] = optional_string(v.driver);
  versions["nccl"] = library_json(v.nccl);
  versions["libfabric"] = library_json(v.libfabric);
  out["versions"] = std::move(versions);
  return out;
}

}  // namespace pickle::topology
