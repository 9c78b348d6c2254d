#pragma once
// Process management behind `pickle launch`: starts N local ranks of a command with torchrun's variables, forwards
// their output line by line, and ends the whole job as soon as one rank fails. Argument parsing lives in
// cmd_launch.cpp; this file knows nothing about the command line.

#include <chrono>
#include <string>
#include <vector>

namespace pickle::launch {

/// What to start and how. cmd_launch.cpp fills it from the command line.
struct LaunchOptions {
  int nproc = 0;                          ///< number of local ranks, >= 1
  std::string master_addr = "127.0.0.1";  ///< MASTER_ADDR given to every rank
  int master_port = 0;                    ///< MASTER_PORT; 0: the launcher picks a free port
  bool prefix = true;                     ///< prefix each output line of rank r with "[r] "
  std::vector<std::string> extra_env;     ///< "K=V" entries added to every rank's environment
  std::vector<std::string> command;       ///< program (looked up in PATH) and its arguments
  /// A rank that exits with a non-zero code has said why itself (pickle's own ranks do, in `pickle bench` and
  /// `selftest`): the launcher stops the others without a line of its own. A rank killed by a signal is still said.
  bool quiet_exits = false;
  /// How long ranks get between SIGTERM and SIGKILL once the job is being stopped.
  std::chrono::milliseconds grace = std::chrono::seconds(2);
};

/// Variables the launcher owns and sets for every rank; `--env` may not override them.
bool is_launcher_variable(const std::string& name);

/// Starts the ranks, forwards their output and signals, and waits for all of them. Returns the launcher's exit code:
/// 0 when every rank exited 0; else the first failing rank's exit code, or 128 + the signal that killed it (or that
/// the launcher itself received). Throws pickle::Error when the job cannot be started (command not found, fork or
/// pipe failure); ranks already started are stopped first. Never touches CUDA; uses fork + exec only.
int run(const LaunchOptions& options);

/// A TCP port that is free right now on `addr` (127.0.0.1 binds loopback only; any other address the wildcard).
int pick_free_port(const std::string& addr);

/// 32 hex digits from the kernel's random source: a fresh PICKLE_TOKEN for one job.
std::string random_token();

/// The path execve() should run for `program`: itself when it contains '/', else the first executable match in
/// `path_list` (a PATH value). Throws InvalidArgument naming the program when nothing matches.
std::string resolve_program(const std::string& program, const std::string& path_list);

}  // namespace pickle::launch
