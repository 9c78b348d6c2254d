#include "core/format.hpp"

#include <cstdio>
#include <string>

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
  // Appends rather than a stream: every collective call describes itself once (the head of errors its stream may
  // report later), and an ostringstream's construction alone showed in a small allreduce's host profile.
  std::string out;
  out.reserve(64);
  if (ctx.rank >= 0) out.append("rank ").append(std::to_string(ctx.rank));
  if (ctx.peer >= 0) out.append(ctx.rank >= 0 ? " -> " : "").append("peer ").append(std::to_string(ctx.peer));
  if (!ctx.op.empty()) out.append(out.empty() ? "" : ": ").append(ctx.op);
  if (ctx.bytes != UINT64_MAX) out.append(" of ").append(std::to_string(ctx.bytes)).append(" bytes");
  return out;
}

}  // namespace pickle
