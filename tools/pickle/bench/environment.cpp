#include "environment.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "sizes.hpp"

extern char** environ;

namespace pickle::bench {

json::Value environment_json() {
  // This walks environ to record the environment, not to configure anything: pickle's own settings are read
  // through core/env.hpp.
  std::vector<std::pair<std::string, std::string>> found;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    std::size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    std::string_view name = text.substr(0, equals);
    if (!name.starts_with("PICKLE_") && !name.starts_with("NCCL_") && !name.starts_with("CUDA_")) continue;
    std::string value(text.substr(equals + 1));
    if (name == "PICKLE_TOKEN") value = "(set)";
    found.emplace_back(std::string(name), std::move(value));
  }
  std::sort(found.begin(), found.end());
  json::Value out = json::Value::object();
  for (auto& [name, value] : found) out[name] = std::move(value);
  return out;
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

std::uint64_t host_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  std::uint64_t value = 0;
  while (meminfo >> key >> value) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return value * 1024;  // the kernel writes kB (KiB)
  }
  return 0;
}

std::uint64_t host_buffer_room(std::uint64_t available, std::uint64_t buffers) {
  return available / 4 * 3 / std::max<std::uint64_t>(buffers, 1);
}

std::size_t sweep_buffer_bytes(MemoryKind kind, const std::vector<std::size_t>& sizes) {
  const std::size_t smallest = sizes.front(), largest = sizes.back();
  if (kind != MemoryKind::Host) return largest;
  std::uint64_t available = host_memory_available();
  if (available == 0) return largest;
  // Two ranks of three buffers each share a host. The smallest size is allocated even above the tenth, but within
  // the room of six buffers (an eighth of MemAvailable each; a sixth, all of it, until 2026-11-29j).
  refuse_beyond_memory(smallest, host_buffer_room(available, 6), "an eighth of MemAvailable");
  const std::size_t cap = std::max<std::size_t>(available / 10, smallest);
  // The largest size that will run, not the cap: -b 4K -e 1T -f 1M ran only 4 KiB, in buffers of 2.1 GiB each,
  // filled with the pattern (until 2026-11-30).
  std::size_t fitting = smallest;
  for (const std::size_t size : sizes) {
    if (size <= cap) fitting = std::max(fitting, size);
  }
  return fitting;
}

void refuse_beyond_memory(std::size_t smallest, std::uint64_t room, std::string_view room_is) {
  if (smallest <= room) return;
  // Unavailable (the memory the run needs is not there), not a bad command line: the run exits 1 in every suite.
  throw UnavailableError(cat("the smallest size, ", short_size(smallest),
                            ", does not fit: each buffer may take at most ", room_is, " (", human_bytes(room),
                            " here); ask for a smaller one"));
}

}  // namespace pickle::bench
