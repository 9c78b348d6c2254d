#pragma once
// Turns the signals the launcher handles (child exits and the stop signals it forwards) into bytes on a pipe that
// its poll() loop reads, so that exits, output and signals are events of one loop with no race between a check and
// a wait. The handlers only write the signal's number to the pipe (async-signal-safe), and they run in whichever
// thread the kernel picks: a thread that a library started with the signals unblocked takes them like any other.
// (A signalfd would see a signal only if every thread blocked it; a library thread that did not let SIGTERM end
// the launcher without the ranks hearing of it.)

#include <signal.h>

#include <array>
#include <optional>


namespace pickle::launch {

/// The signals the launcher forwards to the ranks.
inline constexpr std::array kForwardedSignals = {SIGINT, SIGTERM, SIGHUP};

class SignalChannel {
 public:
  /// Installs the handlers (SIGCHLD, and each of kForwardedSignals that the launcher was not started with ignored:
  /// under nohup SIGHUP stays ignored) and ignores SIGPIPE, so that a closed stdout cannot kill the launcher and
  /// orphan the ranks. One channel at a time per process.
  SignalChannel();
  /// Restores the dispositions the process had.
  ~SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  /// Readable when a signal arrived.
  int fd() const;
  /// The next signal that arrived, if any.
  std::optional<int> next();

  /// Blocks the handled signals in this thread until the returned mask is restored: around fork, so that a signal
  /// arriving between fork and exec cannot run the launcher's handler in the child (it would write into the
  /// launcher's pipe).
  sigset_t block_handled();
  /// In a child between fork and exec (async-signal-safe): the dispositions the launcher started with, and then the
  /// signal mask it started with. Ranks inherit what the launcher inherited (an ignored SIGINT stays ignored).
  void restore_in_child(const sigset_t& mask) const;

 private:
  /// Puts back the saved dispositions (sigaction only, so that a child may call it between fork and exec).
  void restore() const;

  struct sigaction original_sigchld_ {};
  std::array<struct sigaction, kForwardedSignals.size()> original_forwarded_{};
  struct sigaction original_sigpipe_ {};
};

}  // namespace pickle::launch
