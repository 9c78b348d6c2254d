#pragma once
// Running one child process set of `pickle bench transports`: the pickle executable itself as `pickle bench <suite>`,
// with its own environment and its output in files, waited for against a deadline. The orchestrator never touches
// CUDA before its children are done, so starting them by fork + exec is safe.

#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

namespace pickle::bench {

/// A private folder for the children's output files, removed with its contents on destruction. While it exists,
/// SIGINT, SIGTERM, SIGHUP and SIGPIPE do not end the process at once: run_child stops its child and unwinds, the
/// folder goes, and then the process ends by that signal (so a Ctrl-C leaves no folder behind and still exits 130,
/// and output piped into `head` that quits early leaves none either: 141).
class ScratchDir {
 public:
  /// Creates $TMPDIR/pickle-transports-XXXXXX (SystemError when it cannot).
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  /// The path of `name` inside the folder.
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  /// What the signals of kStopSignals (transports_child.cpp) did before, in that order, restored at the end.
  struct sigaction previous_[4] {};
};

/// How a child ended.
struct ChildOutcome {
  bool exited = false;     ///< it exited by itself (exit_code is valid)
  int exit_code = -1;      ///< its exit code when it exited
  int signal = 0;          ///< the signal that ended it, when it did not exit
  bool timed_out = false;  ///< it ran past its limit and was stopped
  double seconds = 0;      ///< wall time from start to end
  bool ok() const { return exited && exit_code == 0 && !timed_out; }
  /// "exited with code 1", "was killed by signal 9 (Killed)", "ran past its 900 s limit and was stopped".
  std::string describe() const;
};

/// Runs `program args...` with exactly `env` as its environment, stdout and stderr in the files named (created or
/// truncated), stdin empty. Waits at most `limit`; past it the child gets SIGTERM (a `pickle bench` child forwards
/// it to its ranks), then SIGKILL. If this process dies, the child gets SIGTERM (PR_SET_PDEATHSIG), so no rank is
/// left behind. Throws SystemError when the child cannot be started (fork, files, exec). On SIGINT or SIGTERM
/// (while a ScratchDir exists) it stops the child as at its limit and throws an exception that is not an Error, so
/// that nothing on the way takes it for a failed run: the ScratchDir ends the process.
ChildOutcome run_child(const std::string& program, const std::vector<std::string>& args,
                       const std::vector<std::string>& env, const std::string& stdout_path,
                       const std::string& stderr_path, std::chrono::milliseconds limit);

/// How long one child may run: max(900 s, 20 x PICKLE_TIMEOUT). Its own waits are bounded by PICKLE_TIMEOUT; its
/// total time is not (a 1 GiB sweep through host staging takes minutes), so the limit is generous and only catches
/// what PICKLE_TIMEOUT cannot (NCCL's own initialisation, which waits as long as NCCL decides).
std::chrono::milliseconds child_limit();

/// The last `max_lines` lines of a file (empty when it cannot be read), each at most 300 characters.
std::string file_tail(const std::string& path, int max_lines);

/// The running executable (/proc/self/exe), for starting copies of this `pickle`.
std::string self_executable();

/// This process's environment as KEY=VALUE entries.
std::vector<std::string> current_environment();

}  // namespace pickle::bench
