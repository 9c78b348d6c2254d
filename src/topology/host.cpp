#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/format.hpp"
#include "topology/probes.hpp"
#include "topology/sysfs.hpp"

namespace pickle::topology {
namespace {

/// The value of the first "key : value" line of /proc/cpuinfo whose key is `key`.
std::string cpuinfo_field(const std::string& cpuinfo, std::string_view key) {
  std::istringstream lines(cpuinfo);
  std::string line;
  while (std::getline(lines, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(std::string_view(line).substr(0, colon)) == key) {
      return std::string(trim(std::string_view(line).substr(colon + 1)));
    }
  }
  return "";
}

std::string cpu_model(const std::string& arch) {
  auto cpuinfo = read_text_file("/proc/cpuinfo");
  if (!cpuinfo) return "unknown";
  // x86 says "model name"; some ARM kernels "Model" or "Hardware". Arm servers (Grace) give only the implementer and
  // part numbers, which identify the core for anyone who looks them up.
  for (std::string_view key : {"model name", "Model", "Hardware", "cpu model", "cpu"}) {
    std::string value = cpuinfo_field(*cpuinfo, key);
    if (!value.empty()) return value;
  }
  std::string implementer = cpuinfo_field(*cpuinfo, "CPU implementer");
  std::string part = cpuinfo_field(*cpuinfo, "CPU part");
  if (!implementer.empty()) return cat(arch, " (CPU implementer ", implementer, ", part ", part, ")");
  return "unknown";
}

/// Bytes from a "<label> <number> kB" line of a meminfo file (/proc/meminfo or a NUMA node's meminfo).
std::uint64_t meminfo_bytes(const std::string& path, std::string_view label) {
  auto text = read_text_file(path);
  if (!text) return 0;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    auto at = line.find(label);
    if (at == std::string::npos) continue;
    std::uint64_t kib = std::strtoull(line.c_str() + at + label.size(), nullptr, 10);
    return kib * 1024;
  }
  return 0;
}

std::vector<NumaNode> numa_nodes() {
  namespace fs = std::filesystem;
  std::vector<NumaNode> nodes;
  std::error_code error;
  fs::directory_iterator it("/sys/devices/system/node", error);
  if (error) return nodes;
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (name.size() <= 4 || name.rfind("node", 0) != 0) continue;
    if (!std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    NumaNode node;
    node.id = std::atoi(name.c_str() + 4);
    node.cpus = read_first_line(entry.path() / "cpulist").value_or("");
    node.memory_bytes = meminfo_bytes(entry.path() / "meminfo", "MemTotal:");
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(), [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return nodes;
}

}  // namespace

int cpus_allowed() {
  // Sized for hosts with more than CPU_SETSIZE (1024) CPUs.
  const int max_cpus = std::max(static_cast<int>(sysconf(_SC_NPROCESSORS_CONF)), 1024);
  cpu_set_t* set = CPU_ALLOC(static_cast<std::size_t>(max_cpus));
  if (set == nullptr) return 0;
  const std::size_t size = CPU_ALLOC_SIZE(static_cast<std::size_t>(max_cpus));
  int count = 0;
  if (sched_getaffinity(0, size, set) == 0) count = CPU_COUNT_S(size, set);
  CPU_FREE(set);
  return count;
}

HostInfo scan_host() {
  HostInfo host;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) == 0) host.hostname = name;
  utsname uts{};
  if (uname(&uts) == 0) {
    if (host.hostname.empty()) host.hostname = uts.nodename;
    host.kernel = cat(uts.sysname, " ", uts.release);
    host.arch = uts.machine;
  }
  host.cpu_model = cpu_model(host.arch);
  host.logical_cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  host.cpus_allowed = cpus_allowed();
  host.memory_bytes = meminfo_bytes("/proc/meminfo", "MemTotal:");
  host.numa_nodes = numa_nodes();
  return host;
}

}  // namespace pickle::topology
