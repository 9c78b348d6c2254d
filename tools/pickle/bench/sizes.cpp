#include "sizes.hpp"

#include <cctype>
#include <cstdio>
#include <limits>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

std::uint64_t parse_size(std::string_view text, std::string_view flag, bool allow_zero) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(cat(flag, " '", text, "': ", why, " (use bytes or a K/M/G/T multiple, e.g. 4K, 1M, 16G)"));
  };
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) throw bad("not a size");
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) throw bad("too large");
    value = value * 10 + digit;
  }
  std::string_view suffix = text.substr(digits);
  int shift = 0;
  if (!suffix.empty()) {
    switch (std::tolower(static_cast<unsigned char>(suffix[0]))) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      case 'b': shift = 0; break;
      default: throw bad("unknown unit");
    }
    std::string_view rest = suffix.substr(1);
    bool plain_bytes = std::tolower(static_cast<unsigned char>(suffix[0])) == 'b';
    if (plain_bytes ? !rest.empty() : !(rest.empty() || rest == "B" || rest == "b" || rest == "iB")) {
      throw bad("unknown unit");
    }
  }
  if (shift > 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift)) throw bad("too large");
  value <<= shift;
  if (value == 0 && !allow_zero) throw bad("must be at least 1 byte");
  return value;
}

std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes, std::size_t factor) {
  std::vector<std::size_t> sizes;
  if (min_bytes == 0 || factor < 2) return sizes;
  for (std::size_t size = min_bytes; size <= max_bytes;) {
    sizes.push_back(size);
    if (size > max_bytes / factor) break;  // the next step would pass max_bytes (or overflow)
    size *= factor;
  }
  return sizes;
}

std::string short_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  int unit = 0;
  std::uint64_t value = bytes;
  while (unit < 4 && value >= 1024 && value % 1024 == 0) {
    value /= 1024;
    ++unit;
  }
  return cat(value, kUnits[unit]);
}

}  // namespace pickle::bench
