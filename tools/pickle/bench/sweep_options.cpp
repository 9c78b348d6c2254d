#include "sweep_options.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <pickle/error.hpp>

#include "core/error_text.hpp"
#include "core/format.hpp"
#include "sizes.hpp"

namespace pickle::bench {

bool FlagReader::next() {
  if (started_) ++index_;
  started_ = true;
  return index_ < args_.size();
}

const std::string& FlagReader::value() {
  if (index_ + 1 >= args_.size()) throw InvalidArgument(cat(flag(), " needs a value"));
  return args_[++index_];
}

const std::string& FlagReader::file_value() {
  const std::string flag_given = flag();  // value() moves past it
  const std::string& name = value();
  if (name.empty()) throw InvalidArgument(cat(flag_given, " needs a file name, not ''"));
  return name;
}

void FlagReader::unknown() const { throw InvalidArgument(cat("unknown option '", flag(), "'")); }

bool parse_sweep_flag(FlagReader& in, SweepOptions& sweep, long long max_count) {
  const std::string& flag = in.flag();
  if (flag == "-b") {
    sweep.min_bytes = parse_size(in.value(), "-b");
    sweep.min_given = true;
  } else if (flag == "-e") {
    sweep.max_bytes = parse_size(in.value(), "-e");
  } else if (flag == "-f") {
    sweep.factor = static_cast<std::size_t>(parse_int(in.value(), "-f", 2, 1 << 20));
  } else if (flag == "-n") {
    sweep.iterations = static_cast<int>(parse_int(in.value(), "-n", 1, max_count));
  } else if (flag == "-w") {
    parse_warmup(in.value(), sweep, max_count);
  } else if (flag == "--memory") {
    sweep.memory = in.value();
    if (sweep.memory != "host" && sweep.memory != "cuda") {
      throw InvalidArgument(cat("--memory '", sweep.memory, "': use host or cuda"));
    }
  } else if (flag == "--json") {
    sweep.json_path = in.file_value();
  } else if (flag == "-h" || flag == "--help") {
    sweep.help = true;
  } else {
    return false;
  }
  return true;
}

void parse_warmup(const std::string& text, SweepOptions& sweep, long long max_count) {
  try {
    sweep.warmup = static_cast<int>(parse_int(text, "-w", sweep.min_warmup, max_count));
  } catch (const InvalidArgument& e) {
    if (sweep.min_warmup == 0) throw;
    throw InvalidArgument(cat(without_head(e.what()), ": ", kP2pWarmupWhy));
  }
}

void settle_sweep_range(SweepOptions& sweep) {
  if (sweep.max_bytes != 0 && sweep.min_bytes > sweep.max_bytes) {
    if (sweep.min_given) throw InvalidArgument(cat("-b ", sweep.min_bytes, " is larger than -e ", sweep.max_bytes));
    sweep.min_bytes = sweep.max_bytes;  // only -e was given, below the default -b: run that one size
  }
}

std::size_t sweep_max_bytes(const SweepOptions& sweep, std::size_t default_max) {
  return std::max(sweep.max_bytes != 0 ? sweep.max_bytes : default_max, sweep.min_bytes);
}

long long parse_int(const std::string& text, const std::string& flag, long long min, long long max) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') throw InvalidArgument(cat(flag, " '", text, "': not an integer"));
  if (value < min || value > max) {
    throw InvalidArgument(cat(flag, " ", value, ": must be between ", min, " and ", max));
  }
  return value;
}

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InvalidArgument(cat(flag, " '", text, "': empty item in the list"));
    if (std::find(items.begin(), items.end(), item) != items.end()) {
      throw InvalidArgument(cat(flag, " '", text, "': '", item, "' is listed twice"));
    }
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

namespace {

std::string choice_words(std::span<const std::string_view> choices) {
  std::string words;
  for (const auto& choice : choices) words += cat(words.empty() ? "" : ", ", choice);
  return words;
}

}  // namespace

std::size_t parse_choice(const std::string& text, const std::string& flag, std::span<const std::string_view> choices) {
  auto found = std::find(choices.begin(), choices.end(), text);
  if (found == choices.end()) {
    throw InvalidArgument(cat(flag, ": unknown value '", text, "' (choose from ", choice_words(choices), ")"));
  }
  return static_cast<std::size_t>(found - choices.begin());
}

std::vector<std::string> parse_choice_list(const std::string& text, const std::string& flag,
                                           std::span<const std::string_view> choices) {
  std::vector<std::string> items = split_list(text, flag);
  for (const auto& item : items) {
    if (std::find(choices.begin(), choices.end(), item) == choices.end()) {
      throw InvalidArgument(cat(flag, ": unknown item '", item, "' (choose from ", choice_words(choices), ")"));
    }
  }
  return items;
}

}  // namespace pickle::bench
