#pragma once
// Leveled logging to stderr: PICKLE_LOG=error|warn|info|debug, PICKLE_LOG_SUBSYS=bootstrap,device,...
// Usage: PICKLE_LOG(Info, "bootstrap", "connected to " << host << ":" << port);

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace pickle::log {

enum class Level : int { Error = 0, Warn = 1, Info = 2, Debug = 3 };

struct Config {
  Level level = Level::Warn;
  std::vector<std::string> subsystems;  ///< empty: every subsystem
  bool allows(Level message_level, std::string_view subsystem) const;
};

/// Parses the two variables' values; an unknown level is an InvalidArgument.
Config parse_config(std::string_view level, std::string_view subsystems);

/// Whether a message would be printed (the config is read from the environment once).
bool enabled(Level level, std::string_view subsystem);
void write(Level level, std::string_view subsystem, const std::string& message);

/// The rank printed in every line once it is known.
void set_rank(int rank);

}  // namespace pickle::log

#define PICKLE_LOG(level, subsystem, stream_expr)                                            \
  do {                                                                                       \
    if (::pickle::log::enabled(::pickle::log::Level::level, subsystem)) {                    \
      std::ostringstream pickle_log_stream_;                                                 \
      pickle_log_stream_ << stream_expr;                                                     \
      ::pickle::log::write(::pickle::log::Level::level, subsystem, pickle_log_stream_.str()); \
    }                                                                                        \
  } while (0)
