#pragma once
// Command-line helpers the probes share (C++17: some probes are CUDA sources).
#include <cstddef>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

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

/// "8,16,32" -> {8, 16, 32}.
inline std::vector<int> parse_ints(const std::string& text) {
  std::vector<int> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::atoi(item.c_str()));
  return values;
}

/// "64M,512M" -> bytes of each (parse_bytes).
inline std::vector<std::size_t> parse_byte_list(const std::string& text) {
  std::vector<std::size_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(parse_bytes(item));
  return values;
}

}  // namespace probe
