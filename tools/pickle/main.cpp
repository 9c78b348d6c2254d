// `pickle <command> [args]`: dispatch to one subcommand; every pickle::Error becomes a message and exit code 1.
#include <cstdio>
#include <cstring>
#include <exception>

#include <pickle/error.hpp>
#include <pickle/version.hpp>

#include "bench/lockstep.hpp"
#include "commands.hpp"

namespace pickle::cli {
namespace {

struct Command {
  const char* name;
  int (*run)(const Args&);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"version", cmd_version, "print pickle's version"},
    {"info", cmd_info, "describe this host: CPU, GPUs, links between them, library versions (--json)"},
    {"launch", cmd_launch, "start N local ranks of a command with torchrun's variables"},
    {"selftest", cmd_selftest, "move checked data between ranks through exported memory and stream flags"},
    {"bench", cmd_bench, "benchmark suites (p2p, memcpy, ipc, coll, scenario, interference, compute, transports, "
                         "matrix): pickle beside NCCL, checked data"},
    {"report", cmd_report, "plots and a Markdown report (report.md) from `pickle bench --json` result files"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: pickle <command> [options]\n\ncommands:\n");
  for (const auto& command : kCommands) std::fprintf(out, "  %-12s %s\n", command.name, command.summary);
  std::fprintf(out, "\n`pickle <command> --help` describes a command's options.\n");
}

}  // namespace

int cmd_version(const Args& args) {
  // As every other command: an option it does not know is a bad command line (it printed the version and exited 0).
  if (!args.empty() && args[0] != "-h" && args[0] != "--help") {
    std::fprintf(stderr, "pickle version: takes no options (got '%s')\n", args[0].c_str());
    return 2;
  }
  if (!args.empty()) {
    std::printf("usage: pickle version (or pickle --version): prints the version; `pickle info` adds the source "
                "revision and build type\n");
    return 0;
  }
  std::printf("pickle %s\n", PICKLE_VERSION_STRING);
  return 0;
}

}  // namespace pickle::cli

int main(int argc, char** argv) {
  using namespace pickle::cli;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) return cmd_version(Args());
  for (const auto& command : kCommands) {
    if (std::strcmp(argv[1], command.name) != 0) continue;
    try {
      return command.run(Args(argv + 2, argv + argc));
    } catch (const pickle::Error& e) {
      // "pickle bench: <what went wrong>", without the error's own "pickle <Code> error: " head.
      std::fprintf(stderr, "pickle %s: %s\n", command.name, pickle::bench::plain_message(e).c_str());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pickle %s: unexpected error: %s\n", command.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "pickle: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
