// Debian's and Ubuntu's libfabric link the PSM provider, whose libinfinipath.so.4 installs handlers for SIGINT,
// SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM when it is loaded (before main): they print a backtrace and call
// exit(). A process linked with libpickle therefore ran its exit handlers from the signal handler while its threads
// still ran: ranks stopped with SIGTERM by `pickle launch` crashed in NCCL's unloading and in a double free instead of
// ending (docs/results/2026-11-28-h200x4.md), and a real segfault left no core dump. libinfinipath skips this when
// IPATH_NO_BACKTRACE is set; otherwise, when libpickle is loaded (after its dependencies, so after libinfinipath),
// every signal whose handler lies in libinfinipath gets its default action back. Handlers anyone else installed, and
// those installed later, are left alone. No logging here: this runs during static initialisation.
#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <initializer_list>

namespace pickle::transport::net {
namespace {

bool handled_in_libinfinipath(const struct sigaction& action) {
  if ((action.sa_flags & SA_SIGINFO) == 0 && (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN)) {
    return false;
  }
  const void* handler = (action.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<const void*>(action.sa_sigaction)
                                                             : reinterpret_cast<const void*>(action.sa_handler);
  Dl_info info{};
  return dladdr(handler, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libinfinipath") != nullptr;
}

__attribute__((constructor)) void give_back_signals_taken_by_libinfinipath() {
  for (int sig : {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM}) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0 || !handled_in_libinfinipath(current)) continue;
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    ::sigaction(sig, &default_action, nullptr);
  }
}

}  // namespace
}  // namespace pickle::transport::net
