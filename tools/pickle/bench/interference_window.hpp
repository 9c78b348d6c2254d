#pragma once
// The arithmetic that proves a background overlapped a foreground measurement, kept free of CUDA so that it is
// tested on synthetic timestamps: both come from the host's monotonic clock (CLOCK_MONOTONIC, steady_clock), which
// the ranks of one host share.
//
// The background's evidence is the completion time of every message on the receiving rank. In steady state the link
// moves message i between the completions of messages i-1 and i, so each message's bytes are spread evenly over that
// interval, and the bandwidth inside the window is the bytes so attributed to the window divided by its length. With
// messages much shorter than the window this is "bytes completed inside the window / its length"; with messages of
// several GiB (tens of ms each) counting whole completions would be off by up to a message per window, the
// attribution is not.

#include <cstddef>
#include <cstdint>
#include <span>

namespace pickle::bench {

/// What the background did during one foreground window.
struct WindowStats {
  double window_ms = 0;                ///< length of the window
  double bytes_in_window = 0;          ///< bytes attributed to the window (see the file comment)
  double gbps = 0;                     ///< bytes_in_window / window length, in 1e9 bytes per second
  std::uint64_t completed_in_window = 0;  ///< messages whose completion lies inside the window
  std::uint64_t messages = 0;          ///< completions recorded in all
  /// A message completed at or before the window's start and another at or after its end: data was flowing when
  /// the window opened and still when it closed.
  bool overlap = false;
  double lead_ms = 0;     ///< window start - first completion (>= 0 when the background was flowing before)
  double tail_ms = 0;     ///< last completion - window end (>= 0 when the background went on after)
  double max_gap_ms = 0;  ///< longest interval between consecutive completions that intersects the window
};

/// Computes the stats of one window [start_ns, end_ns] from completion times (ascending) of messages of
/// `bytes_per_message` bytes. InvalidArgument when end < start or the completions are not in order.
WindowStats window_stats(std::span<const std::int64_t> completions_ns, std::size_t bytes_per_message,
                         std::int64_t start_ns, std::int64_t end_ns);

/// Whether a background that has completed `completed` messages, the first at `first_ns`, is in steady state at
/// `now_ns`: the ring of `depth` messages has turned over twice (connections and mappings made by the first
/// messages are behind it) and data has flowed for at least `min_flow_ns`.
bool background_steady(std::uint64_t completed, std::int64_t first_ns, std::int64_t now_ns, int depth,
                       std::int64_t min_flow_ns);

/// The message count at which every rank of a halted background stops: each rank posted its own count, and those
/// that posted fewer post the difference, so that every send meets a receive and every rank makes every collective
/// call (NCCL and pickle both need them all). The largest count; 0 for none.
std::uint64_t drain_target(std::span<const std::uint64_t> posted) noexcept;
/// drain_target() of two ranks.
std::uint64_t drain_target(std::uint64_t posted_here, std::uint64_t posted_there) noexcept;

/// One measured row's verdict: it fails when the background did not overlap the window, when bytes were wrong, or
/// when the foreground's result changed.
bool row_passed(bool overlap, std::uint64_t background_wrong, std::uint64_t foreground_wrong) noexcept;

}  // namespace pickle::bench
