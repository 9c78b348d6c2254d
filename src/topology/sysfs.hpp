#pragma once
// Reading the small text files of /proc and /sys. A file that is missing or unreadable is an absent fact (containers
// hide parts of /sys), so these return nullopt instead of throwing.

#include <optional>
#include <string>
#include <string_view>

namespace pickle::topology {

/// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_text_file(const std::string& path);
/// The file's first line without surrounding whitespace, or nullopt.
std::optional<std::string> read_first_line(const std::string& path);
/// The file's content as a decimal integer, or nullopt when missing or not a number.
std::optional<long long> read_integer_file(const std::string& path);
/// Text without leading and trailing whitespace.
std::string_view trim(std::string_view text);

}  // namespace pickle::topology
