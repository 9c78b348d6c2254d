#include "interference_window.hpp"

#include <algorithm>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

WindowStats window_stats(std::span<const std::int64_t> completions_ns, std::size_t bytes_per_message,
                         std::int64_t start_ns, std::int64_t end_ns) {
  if (end_ns < start_ns) {
    throw InvalidArgument(cat("interference window ends (", end_ns, " ns) before it starts (", start_ns, " ns)"));
  }
  WindowStats stats;
  stats.window_ms = static_cast<double>(end_ns - start_ns) / 1e6;
  stats.messages = completions_ns.size();
  if (completions_ns.empty()) return stats;

  const double bytes = static_cast<double>(bytes_per_message);
  for (std::size_t i = 0; i < completions_ns.size(); ++i) {
    const std::int64_t done = completions_ns[i];
    if (i > 0 && done < completions_ns[i - 1]) {
      throw InvalidArgument(cat("interference: background completion ", i, " (", done, " ns) is earlier than the one "
                                "before it (", completions_ns[i - 1], " ns)"));
    }
    if (done >= start_ns && done <= end_ns) ++stats.completed_in_window;
    // Message 0 has no known start: it counts as a point at its completion. Later ones spread over (previous, own].
    const std::int64_t from = i == 0 ? done : completions_ns[i - 1];
    if (from == done) {
      if (done >= start_ns && done <= end_ns) stats.bytes_in_window += bytes;
      continue;
    }
    const std::int64_t lo = std::max(from, start_ns), hi = std::min(done, end_ns);
    if (hi > lo) {
      stats.bytes_in_window += bytes * static_cast<double>(hi - lo) / static_cast<double>(done - from);
      stats.max_gap_ms = std::max(stats.max_gap_ms, static_cast<double>(done - from) / 1e6);
    }
  }
  const std::int64_t first = completions_ns.front(), last = completions_ns.back();
  stats.lead_ms = static_cast<double>(start_ns - first) / 1e6;
  stats.tail_ms = static_cast<double>(last - end_ns) / 1e6;
  stats.overlap = first <= start_ns && last >= end_ns;
  if (end_ns > start_ns) stats.gbps = stats.bytes_in_window / static_cast<double>(end_ns - start_ns);  // B/ns = GB/s
  return stats;
}

bool background_steady(std::uint64_t completed, std::int64_t first_ns, std::int64_t now_ns, int depth,
                       std::int64_t min_flow_ns) {
  const std::uint64_t turns = 2 * static_cast<std::uint64_t>(std::max(depth, 1));
  return completed >= turns && now_ns - first_ns >= min_flow_ns;
}

std::uint64_t drain_target(std::span<const std::uint64_t> posted) noexcept {
  std::uint64_t target = 0;
  for (std::uint64_t count : posted) target = std::max(target, count);
  return target;
}

std::uint64_t drain_target(std::uint64_t posted_here, std::uint64_t posted_there) noexcept {
  const std::uint64_t both[] = {posted_here, posted_there};
  return drain_target(both);
}

bool row_passed(bool overlap, std::uint64_t background_wrong, std::uint64_t foreground_wrong) noexcept {
  return overlap && background_wrong == 0 && foreground_wrong == 0;
}

}  // namespace pickle::bench
