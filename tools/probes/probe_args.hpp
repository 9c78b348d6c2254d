#pragma once
// Command-line helpers the probes share (C++17: some probes are CUDA sources).
#include <cstddef>
#include <cstdlib>
#include <string>

namespace probe {

/// "4096", "64K", "16M", "1G" -> bytes.
inline std::size_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  std::size_t value = std::strtoull(text.c_str(), &end, 10);
  if (*end == 'K' || *end == 'k') value <<= 10;
  if (*end == 'M' || *end == 'm') value <<= 20;
  if (*end == 'G' || *end == 'g') value <<= 30;
  return value;
}

}  // namespace probe
