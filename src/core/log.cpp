#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <string>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"

namespace pickle::log {
namespace {

std::atomic<int> g_rank{-1};
const std::int64_t g_start_ns = now_ns();

const Config& config() {
  // Read once: logging sits on paths where a getenv per call would show. A bad level must not turn the first log
  // line (anywhere, in any thread) into an exception: say so once and log at the default level.
  static const Config parsed = [] {
    try {
      return parse_config(env::get("PICKLE_LOG"), env::get("PICKLE_LOG_SUBSYS"));
    } catch (const Error& e) {
      std::fprintf(stderr, "pickle: %s; logging at warn\n", e.message().c_str());
      return parse_config("warn", env::get("PICKLE_LOG_SUBSYS"));
    }
  }();
  return parsed;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::Error: return "ERROR";
    case Level::Warn: return "WARN";
    case Level::Info: return "INFO";
    case Level::Debug: return "DEBUG";
  }
  return "?";
}

}  // namespace

bool Config::allows(Level message_level, std::string_view subsystem) const {
  if (static_cast<int>(message_level) > static_cast<int>(level)) return false;
  if (subsystems.empty() || message_level == Level::Error) return true;
  for (const auto& name : subsystems) {
    if (name == subsystem) return true;
  }
  return false;
}

Config parse_config(std::string_view level_text, std::string_view subsystems) {
  Config result;
  std::string level(level_text);  // any case: PICKLE_LOG=INFO means info
  for (char& c : level) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (level == "error") result.level = Level::Error;
  else if (level == "warn" || level.empty()) result.level = Level::Warn;
  else if (level == "info") result.level = Level::Info;
  else if (level == "debug") result.level = Level::Debug;
  else throw InvalidArgument(cat("PICKLE_LOG='", level_text, "': use error, warn, info or debug"));

  while (!subsystems.empty()) {
    auto comma = subsystems.find(',');
    auto name = subsystems.substr(0, comma);
    if (!name.empty()) result.subsystems.emplace_back(name);
    if (comma == std::string_view::npos) break;
    subsystems.remove_prefix(comma + 1);
  }
  return result;
}

bool enabled(Level level, std::string_view subsystem) { return config().allows(level, subsystem); }

void write(Level level, std::string_view subsystem, const std::string& message) {
  double seconds = static_cast<double>(now_ns() - g_start_ns) * 1e-9;
  int rank = g_rank.load(std::memory_order_relaxed);
  std::string rank_text = rank >= 0 ? cat(" rank ", rank) : std::string();
  // One fprintf per line so that lines from several threads do not interleave.
  std::fprintf(stderr, "[pickle%s pid %d %.3fs] %s %.*s: %s\n", rank_text.c_str(), static_cast<int>(getpid()),
               seconds, level_name(level), static_cast<int>(subsystem.size()), subsystem.data(), message.c_str());
}

void set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

}  // namespace pickle::log
