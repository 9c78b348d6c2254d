#include "signal_channel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include <pickle/error.hpp>

namespace pickle::launch {
namespace {

// The write end of the live channel's pipe, for the handler. -1: no channel.
std::atomic<int> g_write_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads it");

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

void install(int sig, struct sigaction& original) {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (::sigaction(sig, &action, &original) != 0) throw SystemError("launch: sigaction", errno);
}

}  // namespace

SignalChannel::SignalChannel() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw SystemError("launch: pipe for signals", errno);
  read_ = UniqueFd(fds[0]);
  write_ = UniqueFd(fds[1]);
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, write_.get())) {
    throw InvalidArgument("launch: a second launcher in one process (the signal channel is in use)");
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &original_sigpipe_);
  try {
    install(SIGCHLD, original_sigchld_);
    for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) install(kForwardedSignals[i], original_forwarded_[i]);
  } catch (...) {
    restore();
    throw;
  }
}

SignalChannel::~SignalChannel() { restore(); }

void SignalChannel::restore() {
  ::sigaction(SIGCHLD, &original_sigchld_, nullptr);
  for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) {
    ::sigaction(kForwardedSignals[i], &original_forwarded_[i], nullptr);
  }
  ::sigaction(SIGPIPE, &original_sigpipe_, nullptr);
  g_write_fd.store(-1);
}

std::optional<int> SignalChannel::next() {
  unsigned char byte = 0;
  ssize_t n;
  do n = ::read(read_.get(), &byte, 1);
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
  ::sigaction(SIGCHLD, &original_sigchld_, nullptr);
  for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) {
    ::sigaction(kForwardedSignals[i], &original_forwarded_[i], nullptr);
  }
  ::sigaction(SIGPIPE, &original_sigpipe_, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
}

}  // namespace pickle::launch
