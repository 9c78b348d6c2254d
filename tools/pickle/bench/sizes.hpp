#pragma once
// Message sizes the nccl-tests way: "4K", "1M", "16G" or plain bytes, and the geometric sweep -b/-e/-f.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pickle::bench {

/// Parses "4096", "4K", "1M", "16G", "1T" (binary multiples, case-insensitive; "KB"/"KiB" spellings accepted).
/// Anything else, zero included when `allow_zero` is false, is an InvalidArgument naming `flag`.
std::uint64_t parse_size(std::string_view text, std::string_view flag, bool allow_zero = false);

/// b, b*f, b*f^2, ... up to and including e (e itself need not be on the progression).
std::vector<std::size_t> size_sweep(std::size_t min_bytes, std::size_t max_bytes, std::size_t factor);

/// "4K", "1M", "1.5M", "1000": sizes as the table prints them (short, exact for powers of two).
std::string short_size(std::uint64_t bytes);

}  // namespace pickle::bench
