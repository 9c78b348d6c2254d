// `pickle launch -n N [options] [--] cmd args...`: the command line of the local launcher. Parsing only; the
// processes are managed by launcher.cpp.
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <pickle/error.hpp>

#include "commands.hpp"
#include "launcher.hpp"

namespace pickle::cli {
namespace {

constexpr const char* kUsage =
    "usage: pickle launch -n N [options] [--] command [args...]\n"
    "\n"
    "Starts N ranks of `command` on this host, each with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and a fresh PICKLE_TOKEN unless one is set. When a rank fails,\n"
    "the others are stopped and the launcher exits with that rank's code (128 + signal when it was killed).\n"
    "\n"
    "options:\n"
    "  -n, --nproc N        number of ranks (required, at least 1)\n"
    "  --master-addr ADDR   MASTER_ADDR for every rank (default 127.0.0.1)\n"
    "  --master-port PORT   MASTER_PORT for every rank (default: a free port the launcher picks)\n"
    "  --env K=V            add a variable to every rank's environment (repeatable)\n"
    "  --tee                prefix each line a rank writes with \"[rank] \" (the default)\n"
    "  --no-prefix          forward the ranks' lines unchanged\n"
    "  -h, --help           show this text\n"
    "\n"
    "`--` ends pickle's options; the first argument that is not an option also starts the command.\n"
    "Multi-node jobs: start one process per rank with srun, mpirun or torchrun instead (see docs/launch.md).\n";

/// A usage mistake: printed with a hint, exit code 2.
struct UsageError {
  std::string message;
};

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

/// Walks the arguments: "--name value", "--name=value" and "-nVALUE" are all accepted.
class ArgReader {
 public:
  explicit ArgReader(const Args& args) : args_(args) {}

  bool done() const { return pos_ >= args_.size(); }
  const std::string& peek() const { return args_[pos_]; }
  void skip() { ++pos_; }

  /// Whether the current argument is option `name` (or `alias`); consumes it when it is.
  bool flag(std::string_view name, std::string_view alias = {}) {
    if (peek() != name && (alias.empty() || peek() != alias)) return false;
    ++pos_;
    return true;
  }

  /// The value of option `name` (or short `alias`), consuming both; nullopt when the argument is another option.
  std::optional<std::string> value(std::string_view name, std::string_view alias = {}) {
    const std::string& arg = peek();
    std::string_view view = arg;
    for (std::string_view spelling : {name, alias}) {
      if (spelling.empty() || !view.starts_with(spelling)) continue;
      std::string_view rest = view.substr(spelling.size());
      if (rest.empty()) {
        if (pos_ + 1 >= args_.size()) throw UsageError{std::string(spelling) + " needs a value"};
        pos_ += 2;
        return args_[pos_ - 1];
      }
      // "--name=value"; for a short alias also "-nVALUE".
      bool is_short = spelling.size() == 2;
      if (rest.front() == '=' || is_short) {
        ++pos_;
        return std::string(rest.front() == '=' ? rest.substr(1) : rest);
      }
    }
    return std::nullopt;
  }

  std::vector<std::string> rest() const { return {args_.begin() + static_cast<long>(pos_), args_.end()}; }

 private:
  const Args& args_;
  std::size_t pos_ = 0;
};

launch::LaunchOptions parse(const Args& args, bool& help) {
  launch::LaunchOptions options;
  bool have_n = false;
  ArgReader reader(args);
  while (!reader.done()) {
    const std::string& arg = reader.peek();
    if (arg == "--") {
      reader.skip();
      break;
    }
    if (arg.empty() || arg.front() != '-') break;  // the command starts here
    if (reader.flag("--help", "-h")) {
      help = true;
      return options;
    }
    if (reader.flag("--tee")) {
      options.prefix = true;
    } else if (reader.flag("--no-prefix")) {
      options.prefix = false;
    } else if (auto n = reader.value("--nproc", "-n")) {
      auto value = parse_int(*n);
      if (!value || *value < 1) throw UsageError{"-n/--nproc needs a number of ranks of at least 1, got '" + *n + "'"};
      options.nproc = *value;
      have_n = true;
    } else if (auto port = reader.value("--master-port")) {
      auto value = parse_int(*port);
      if (!value || *value < 1 || *value > 65535) {
        throw UsageError{"--master-port needs a TCP port from 1 to 65535, got '" + *port + "'"};
      }
      options.master_port = *value;
    } else if (auto addr = reader.value("--master-addr")) {
      if (addr->empty()) throw UsageError{"--master-addr needs an address"};
      options.master_addr = *addr;
    } else if (auto entry = reader.value("--env")) {
      auto eq = entry->find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError{"--env needs NAME=VALUE, got '" + *entry + "'"};
      std::string name = entry->substr(0, eq);
      if (launch::is_launcher_variable(name)) {
        throw UsageError{"--env cannot set " + name + ": the launcher sets it (use -n, --master-addr, --master-port)"};
      }
      options.extra_env.push_back(*entry);
    } else {
      throw UsageError{"unknown option '" + arg + "'"};
    }
  }
  if (!have_n) throw UsageError{"-n/--nproc is required"};
  options.command = reader.rest();
  if (options.command.empty()) throw UsageError{"no command given: pickle launch -n N [options] [--] command [args...]"};
  return options;
}

}  // namespace

int cmd_launch(const Args& args) {
  bool help = false;
  launch::LaunchOptions options;
  try {
    options = parse(args, help);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "pickle launch: %s\n(`pickle launch --help` lists the options)\n", e.message.c_str());
    return 2;
  }
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    return launch::run(options);
  } catch (const Error& e) {
    // The launcher's errors begin "launch: " (they also reach `pickle bench`, which runs it): said once here.
    std::string message = e.message();
    if (message.starts_with("launch: ")) message.erase(0, 8);
    std::fprintf(stderr, "pickle launch: %s\n", message.c_str());
    return 1;
  }
}

}  // namespace pickle::cli
