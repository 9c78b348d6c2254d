#pragma once
// The cells of the suites' text tables (stdout): fixed-point numbers, padded to their column.

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

/// `text` right-aligned in `width` columns; longer text is kept whole.
inline std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

/// `text` left-aligned in `width` columns; longer text is kept whole.
inline std::string pad_right(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

}  // namespace pickle::bench
