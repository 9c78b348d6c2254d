// Topology discovery on the machine the tests run on (CI: no GPU, no NVML, maybe no NCCL), and its JSON form against
// the key table of docs/info.md.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <pickle/version.hpp>

#include "core/json.hpp"
#include "topology/topology.hpp"
#include "topology/topology_json.hpp"

namespace pickle::topology {
namespace {

const Topology& this_host() {
  static const Topology topology = discover();  // one scan for all tests: a GPU scan costs context creation
  return topology;
}

TEST(Topology, HostFacts) {
  const HostInfo& host = this_host().host;
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  EXPECT_EQ(host.hostname, name);
  EXPECT_EQ(host.kernel.rfind("Linux ", 0), 0u) << host.kernel;
  EXPECT_FALSE(host.arch.empty());
  EXPECT_FALSE(host.cpu_model.empty());
  EXPECT_NE(host.cpu_model, "unknown");
  EXPECT_EQ(host.logical_cores, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_GE(host.cpus_allowed, 1);
  EXPECT_LE(host.cpus_allowed, static_cast<int>(sysconf(_SC_NPROCESSORS_CONF)));
  // MemTotal (/proc/meminfo) and the physical page count (sysinfo) are two views of the same memory; the kernel
  // reserves a little from the first.
  auto physical =
      static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  EXPECT_GT(host.memory_bytes, physical / 2);
  EXPECT_LE(host.memory_bytes, physical + (64ull << 20));
  if (std::filesystem::exists("/sys/devices/system/node/node0")) {
    ASSERT_FALSE(host.numa_nodes.empty());
    EXPECT_EQ(host.numa_nodes.front().id, 0);
    EXPECT_FALSE(host.numa_nodes.front().cpus.empty());
    EXPECT_GT(host.numa_nodes.front().memory_bytes, 0u);
  }
}

TEST(Topology, GpusOrAReason) {
  const Topology& topo = this_host();
  if (topo.gpus.empty()) {
    EXPECT_FALSE(topo.no_gpu_reason.empty());
    EXPECT_TRUE(topo.links.empty());
    std::cout << "no GPU here: " << topo.no_gpu_reason << "\n";
    return;
  }
  EXPECT_TRUE(topo.no_gpu_reason.empty()) << topo.no_gpu_reason;
  ASSERT_EQ(topo.links.size(), topo.gpus.size());
  const std::regex bus_id("[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
  const std::regex uuid("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  for (std::size_t i = 0; i < topo.gpus.size(); ++i) {
    const Gpu& gpu = topo.gpus[i];
    EXPECT_EQ(gpu.index, static_cast<int>(i));
    EXPECT_FALSE(gpu.name.empty());
    EXPECT_GT(gpu.sm_count, 0);
    EXPECT_GT(gpu.memory_total_bytes, 0u);
    ASSERT_TRUE(gpu.memory_free_bytes.has_value());
    EXPECT_LE(*gpu.memory_free_bytes, gpu.memory_total_bytes);
    EXPECT_GE(gpu.cc_major, 3);
    EXPECT_GE(gpu.copy_engines, 1);
    EXPECT_TRUE(std::regex_match(gpu.pci_bus_id, bus_id)) << gpu.pci_bus_id;
    EXPECT_TRUE(std::regex_match(gpu.uuid, uuid)) << gpu.uuid;
    ASSERT_EQ(topo.links[i].size(), topo.gpus.size());
    EXPECT_EQ(topo.links[i][i].type, LinkType::Self);
    for (std::size_t j = 0; j < topo.gpus.size(); ++j) {
      if (i == j) continue;
      const Link& link = topo.links[i][j];
      EXPECT_NE(link.type, LinkType::Self);
      if (link.type == LinkType::NvLink || link.type == LinkType::NvSwitch) {
        EXPECT_GT(link.nvlinks, 0);
      }
      if (link.type == LinkType::Pcie) {
        EXPECT_TRUE(link.p2p);
      }
      EXPECT_EQ(link.type == LinkType::Unknown, !topo.nvml.available);
    }
  }
}

TEST(Topology, NoMemoryQueryWhenNotAsked) {
  Topology topo = discover(DiscoverOptions{.memory_free = false});
  for (const auto& gpu : topo.gpus) EXPECT_FALSE(gpu.memory_free_bytes.has_value());
  EXPECT_EQ(topo.gpus.size(), this_host().gpus.size());
}

TEST(Topology, Versions) {
  const Topology& topo = this_host();
  const Versions& v = topo.versions;
  EXPECT_EQ(v.pickle, PICKLE_VERSION_STRING);
#if PICKLE_HAVE_CUDA
  EXPECT_GE(v.cuda_runtime, 11000);
#endif
  EXPECT_FALSE(topo.nvml.detail.empty());  // the loaded file, or why not
  EXPECT_EQ(v.driver.empty(), !topo.nvml.available);
  if (v.nccl.found) {
    EXPECT_TRUE(std::regex_match(v.nccl.version, std::regex("2\\.[0-9]+\\.[0-9]+"))) << v.nccl.version;
  } else {
    EXPECT_TRUE(v.nccl.version.empty());
    EXPECT_NE(v.nccl.detail.find("libnccl.so.2"), std::string::npos) << v.nccl.detail;
  }
  std::cout << "nccl: " << (v.nccl.found ? v.nccl.version : "not found") << " (" << v.nccl.detail << ")\n";
  if (v.libfabric.found) {
    EXPECT_TRUE(std::regex_match(v.libfabric.version, std::regex("1\\.[0-9]+"))) << v.libfabric.version;
  } else {
    EXPECT_NE(v.libfabric.detail.find("libfabric.so.1"), std::string::npos) << v.libfabric.detail;
  }
}

TEST(Topology, CudaVersionStrings) {
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(11080), "11.8");
  EXPECT_EQ(cuda_version_string(0), "none");
}

// --- JSON form -------------------------------------------------------------------------------------------------

/// Every key path of a value: "host.numa_nodes[].id" style, as docs/info.md writes them.
void collect_paths(const json::Value& value, const std::string& prefix, std::set<std::string>& out) {
  if (value.is_object()) {
    for (const auto& member : value.as_object()) {
      std::string path = prefix.empty() ? member.key : prefix + "." + member.key;
      out.insert(path);
      collect_paths(member.value, path, out);
    }
  } else if (value.is_array()) {
    for (const auto& item : value.as_array()) collect_paths(item, prefix + "[]", out);
  }
}

/// The keys of the table in docs/info.md's `--json` section.
std::set<std::string> documented_paths() {
  std::ifstream in(std::string(PICKLE_SOURCE_DIR) + "/docs/info.md");
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str();
  auto section = doc.find("## `--json`");
  EXPECT_NE(section, std::string::npos) << "docs/info.md has no `--json` section";
  std::set<std::string> paths;
  std::istringstream lines(doc.substr(section == std::string::npos ? 0 : section));
  std::string line;
  const std::regex row("^\\| `([a-z0-9_.\\[\\]]+)` \\|.*");
  std::smatch match;
  while (std::getline(lines, line)) {
    if (line.rfind("## ", 0) == 0 && line.find("--json") == std::string::npos) break;
    if (std::regex_match(line, match, row)) paths.insert(match[1]);
  }
  return paths;
}

/// A topology with every optional part present, so that every documented key appears.
Topology full_example() {
  Topology topo;
  topo.host = HostInfo{"node1", "Linux 6.1.0", "x86_64", "Xeon", 224, 224, 2ull << 40,
                       {{0, "0-55,112-167", 1ull << 40}, {1, "56-111,168-223", 1ull << 40}}};
  for (int i = 0; i < 2; ++i) {
    Gpu gpu;
    gpu.index = i;
    gpu.name = "NVIDIA H200";
    gpu.sm_count = 132;
    gpu.memory_total_bytes = 150000000000ull;
    gpu.memory_free_bytes = 149000000000ull;
    gpu.cc_major = 9;
    gpu.pci_bus_id = i == 0 ? "0000:18:00.0" : "0000:2a:00.0";
    gpu.numa_node = i;
    gpu.uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i);
    gpu.copy_engines = 3;
    topo.gpus.push_back(gpu);
  }
  topo.links = {{Link{LinkType::Self, 0, false}, Link{LinkType::NvSwitch, 18, true}},
                {Link{LinkType::NvSwitch, 18, true}, Link{LinkType::Self, 0, false}}};
  topo.nvml = NvmlStatus{true, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"};
  topo.versions = Versions{"0.1.0",      "3b34479d2a1c", "Release", 13000, 12080, "570.124.06",
                           {true, "2.21.5", "/usr/lib/libnccl.so.2"}, {true, "1.18", "/usr/lib/libfabric.so.1"}};
  return topo;
}

TEST(TopologyJson, KeysMatchTheDocumentation) {
  std::set<std::string> documented = documented_paths();
  ASSERT_TRUE(documented.count("schema")) << "docs/info.md table not found";
  // Added by `pickle info`, not part of the topology.
  for (const char* key : {"schema", "transports", "transports[].pair", "transports[].transport", "transports[].reason"}) {
    documented.erase(key);
  }
  std::set<std::string> produced;
  collect_paths(topology::to_json(full_example()), "", produced);
  for (const auto& path : produced) EXPECT_TRUE(documented.count(path)) << path << " is not in docs/info.md";
  for (const auto& path : documented) EXPECT_TRUE(produced.count(path)) << path << " is documented but not produced";
}

TEST(TopologyJson, ValuesAndRoundTrip) {
  json::Value out = topology::to_json(full_example());
  const char* order[] = {"host", "gpus", "no_gpu_reason", "links", "nvml", "versions"};
  ASSERT_EQ(out.size(), std::size(order));
  for (std::size_t i = 0; i < std::size(order); ++i) EXPECT_EQ(out.as_object()[i].key, order[i]);
  EXPECT_TRUE(out.at("no_gpu_reason").is_null());
  EXPECT_EQ(out.at("gpus").at(1).at("pci_bus_id").as_string(), "0000:2a:00.0");
  EXPECT_EQ(out.at("gpus").at(0).at("compute_capability").as_string(), "9.0");
  ASSERT_EQ(out.at("links").size(), 2u);  // ordered pairs of different GPUs only
  const json::Value& link = out.at("links").at(0);
  EXPECT_EQ(link.at("from").as_int(), 0);
  EXPECT_EQ(link.at("to").as_int(), 1);
  EXPECT_EQ(link.at("type").as_string(), "nvswitch");
  EXPECT_EQ(link.at("nvlinks").as_int(), 18);
  EXPECT_EQ(link.at("label").as_string(), "NV18");
  EXPECT_EQ(out.at("versions").at("cuda_driver").as_string(), "12.8");
  EXPECT_EQ(out.at("versions").at("nccl").at("version").as_string(), "2.21.5");
  EXPECT_EQ(json::parse(out.dump(2)), out);

  // This host's own facts serialise and read back too.
  json::Value mine = topology::to_json(this_host());
  EXPECT_EQ(json::parse(mine.dump()), mine);
  EXPECT_EQ(mine.at("gpus").size(), this_host().gpus.size());
  EXPECT_EQ(mine.at("no_gpu_reason").is_null(), this_host().no_gpu_reason.empty());
}

}  // namespace
}  // namespace pickle::topology
