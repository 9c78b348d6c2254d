#pragma once
// Small string helpers for error and log messages (GCC 12 has no <format>).

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

namespace pickle {

/// Concatenates anything that has an operator<< into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

/// "4 KiB", "1.5 GiB": sizes as people read them.
std::string human_bytes(std::uint64_t bytes);

/// Where an operation failed, so that every error names rank, peer, operation and size the same way:
/// "rank 0 -> peer 1: send of 4096 bytes". Fields left at their defaults are omitted.
struct OpContext {
  int rank = -1;
  int peer = -1;
  std::string_view op;
  std::uint64_t bytes = UINT64_MAX;
};
std::string describe(const OpContext& ctx);

}  // namespace pickle
