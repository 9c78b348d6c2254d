#include "core/format.hpp"

#include <cstdio>

namespace pickle {

std::string human_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (value == static_cast<double>(static_cast<std::uint64_t>(value))) {
    std::snprintf(text, sizeof text, "%llu %s", static_cast<unsigned long long>(value), units[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  }
  return text;
}

std::string describe(const OpContext& ctx) {
  std::ostringstream out;
  if (ctx.rank >= 0) out << "rank " << ctx.rank;
  if (ctx.peer >= 0) out << (ctx.rank >= 0 ? " -> " : "") << "peer " << ctx.peer;
  if (!ctx.op.empty()) out << (out.tellp() > 0 ? ": " : "") << ctx.op;
  if (ctx.bytes != UINT64_MAX) out << " of " << ctx.bytes << " bytes";
  return out.str();
}

}  // namespace pickle
