#pragma once
// The data that the benchmark moves, so that every run can check it: each rank owns a long pseudo-random "source"
// stream, and the send buffer of one repeat is a window of that stream at a shift derived from (backend, mode,
// size, repeat, sender). The receiver recomputes the same window and counts the bytes that differ. A transfer
// that did not happen, landed at the wrong offset, was cut short or came from an earlier repeat shows up as
// wrong bytes.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "p2p_options.hpp"

namespace pickle::bench {

/// Windows start at a multiple of 8 bytes below this: the source is this much longer than the largest message.
inline constexpr std::size_t kShiftSpan = 64 * 1024;

/// Byte `index` of rank `rank`'s source stream.
std::uint8_t source_byte(int rank, std::uint64_t index) noexcept;

/// Fills out[0, bytes) with the source stream of `rank` from position `first` (a multiple of 8).
void fill_source(int rank, std::uint64_t first, std::uint8_t* out, std::size_t bytes) noexcept;

/// Where the send buffer's window starts for this repeat (a multiple of 8 below kShiftSpan). `repeat` is -1 for
/// the warm-up.
std::uint64_t window_shift(std::string_view backend, Mode mode, std::size_t bytes, int repeat, int sender) noexcept;

/// Bytes of data[0, bytes) that differ from `sender`'s source stream starting at `first` (a multiple of 8).
std::uint64_t count_wrong(const std::uint8_t* data, std::size_t bytes, int sender, std::uint64_t first) noexcept;

/// What the receive buffer holds before each size: a constant that no transfer writes on purpose.
inline constexpr std::uint8_t kPoisonByte = 0xA5;

}  // namespace pickle::bench
