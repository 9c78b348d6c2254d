#include "bootstrap/token.hpp"

#include <cstdio>

#include "core/env.hpp"
#include "core/format.hpp"

namespace pickle::bootstrap {

std::uint64_t fnv1a64(std::string_view text) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string derive_token(const RankInfo& info) {
  // '|' cannot appear in a host name, a port or a number, so two different jobs cannot produce the same text.
  const std::string material =
      cat("pickle-store-v1|", info.master_addr, "|", info.master_port, "|", info.world_size, "|", info.job_id);
  char text[32];
  std::snprintf(text, sizeof text, "job-%016llx", static_cast<unsigned long long>(fnv1a64(material)));
  return text;
}

std::string job_token(const RankInfo& info) {
  if (auto token = env::get_if_set("PICKLE_TOKEN")) return *token;
  return derive_token(info);
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  // Walk the longer string entirely; the length difference is folded into the result.
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace pickle::bootstrap
