// Preloaded into `pickle launch` by test_launch: a thread started before main() with no signal blocked, as a
// library's worker thread would be. The kernel may hand a process-directed SIGTERM to it instead of the launcher's
// own thread; the launcher must still forward the signal to its ranks.
#include <pthread.h>
#include <unistd.h>

namespace {

void* idle(void*) {
  while (true) ::pause();
  return nullptr;
}

__attribute__((constructor)) void start_idle_thread() {
  pthread_t thread;
  if (::pthread_create(&thread, nullptr, idle, nullptr) == 0) ::pthread_detach(thread);
}

}  // namespace
