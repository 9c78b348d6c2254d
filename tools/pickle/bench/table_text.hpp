#pragma once
// The cells of the suites' text tables (stdout): fixed-point numbers, padded to their column.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>

namespace pickle::bench {

/// `value` with `decimals` digits after the point ("%.*f").
inline std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

/// A rate in GB/s with enough digits to compare, not more: `decimals_from_ten` digits from 10 GB/s up,
/// `decimals_below_ten` below, and at least two significant digits below 0.1. A slow but real rate (a 4 KiB message
/// on a loaded host) must never print as 0.000: a reader would take it for nothing moved, and a ratio over it would
/// divide by zero.
inline std::string gbps_text(double gbps, int decimals_from_ten = 2, int decimals_below_ten = 3) {
  if (gbps >= 10) return fixed(gbps, decimals_from_ten);
  int decimals = decimals_below_ten;
  if (gbps > 0 && gbps < 0.1) {
    decimals = std::max(decimals, std::min(9, 1 - static_cast<int>(std::floor(std::log10(gbps)))));
  }
  return fixed(gbps, decimals);
}

/// `text` right-aligned in `width` columns; longer text is kept whole.
inline std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

/// `text` left-aligned in `width` columns; longer text is kept whole.
inline std::string pad_right(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

}  // namespace pickle::bench
