#include "signal_channel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include <pickle/error.hpp>

namespace pickle::launch {
namespace {

// The pipe the handlers write to, made once and kept for the life of the process: a handler that runs on another
// thread just as a channel closes must never write into a descriptor number that has meanwhile been reused.
std::once_flag g_pipe_once;
int g_pipe[2] = {-1, -1};
std::atomic<int> g_write_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads it");
std::atomic<bool> g_in_use{false};

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  // Non-blocking: with 64 KiB of unread signals the loop is long behind; dropping one loses nothing it needs
  // (child exits are also polled for).
  if (int fd = g_write_fd.load(); fd >= 0) {
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved;
}

void make_pipe() {
  std::call_once(g_pipe_once, [] {
    if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw SystemError("launch: pipe for signals", errno);
    g_write_fd.store(g_pipe[1]);
  });
}

/// Installs the handler for `sig` over `original`, its saved disposition. A forwarded signal that the launcher was
/// started with ignored (SIGHUP under nohup, SIGINT of a background job) stays ignored: the user asked for that.
void install(int sig, const struct sigaction& original, bool keep_ignored) {
  if (keep_ignored && original.sa_handler == SIG_IGN) return;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (::sigaction(sig, &action, nullptr) != 0) throw SystemError("launch: sigaction", errno);
}

}  // namespace

SignalChannel::SignalChannel() {
  if (g_in_use.exchange(true)) {
    throw InvalidArgument("launch: a second launcher in one process (the signal channel is in use)");
  }
  try {
    make_pipe();
    while (next()) {
    }  // what an earlier launcher in this process left unread
    // Everything is saved before anything is changed, so that restore() puts back only what was there.
    auto save = [](int sig, struct sigaction& original) {
      if (::sigaction(sig, nullptr, &original) != 0) throw SystemError("launch: sigaction", errno);
    };
    save(SIGPIPE, original_sigpipe_);
    save(SIGCHLD, original_sigchld_);
    for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) save(kForwardedSignals[i], original_forwarded_[i]);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, nullptr);
    // SIGCHLD always: an inherited SIG_IGN would make the kernel reap the ranks before the launcher could wait.
    install(SIGCHLD, original_sigchld_, false);
    for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) install(kForwardedSignals[i], original_forwarded_[i], true);
  } catch (...) {
    restore();
    g_in_use.store(false);
    throw;
  }
}

SignalChannel::~SignalChannel() {
  restore();
  g_in_use.store(false);
}

int SignalChannel::fd() const { return g_pipe[0]; }

void SignalChannel::restore() const {
  ::sigaction(SIGCHLD, &original_sigchld_, nullptr);
  for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) {
    ::sigaction(kForwardedSignals[i], &original_forwarded_[i], nullptr);
  }
  ::sigaction(SIGPIPE, &original_sigpipe_, nullptr);
}

std::optional<int> SignalChannel::next() {
  unsigned char byte = 0;
  ssize_t n;
  do n = ::read(g_pipe[0], &byte, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) return std::nullopt;
  return static_cast<int>(byte);
}

sigset_t SignalChannel::block_handled() {
  sigset_t handled, previous;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int sig : kForwardedSignals) sigaddset(&handled, sig);
  if (int err = ::pthread_sigmask(SIG_BLOCK, &handled, &previous); err != 0) {
    throw SystemError("launch: pthread_sigmask", err);
  }
  return previous;
}

void SignalChannel::restore_in_child(const sigset_t& mask) const {
  restore();  // sigaction only: async-signal-safe
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
}

}  // namespace pickle::launch
