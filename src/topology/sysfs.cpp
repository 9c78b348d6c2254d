#include "topology/sysfs.hpp"

#include <charconv>
#include <fstream>
#include <sstream>

namespace pickle::topology {

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return std::string(trim(line));
}

std::optional<long long> read_integer_file(const std::string& path) {
  auto line = read_first_line(path);
  if (!line || line->empty()) return std::nullopt;
  long long value = 0;
  auto [end, error] = std::from_chars(line->data(), line->data() + line->size(), value);
  if (error != std::errc() || end != line->data() + line->size()) return std::nullopt;
  return value;
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  auto last = text.find_last_not_of(kSpace);
  return text.substr(first, last - first + 1);
}

}  // namespace pickle::topology
