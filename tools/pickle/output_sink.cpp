#include "output_sink.hpp"

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace pickle::launch {

OutputSink::OutputSink(int fd) : state_(std::make_shared<State>()) {
  // Started from the launcher's thread after its signal handlers are in place; the handlers may run here too.
  thread_ = std::thread(writer, fd, state_);
}

OutputSink::~OutputSink() {
  // Normally flushed already (the launcher's last step); on an error path give the reader a moment, then drop.
  bool given_up;
  {
    std::lock_guard lock(state_->mutex);
    given_up = state_->given_up;
  }
  if (!given_up) flush(Deadline(kLastFlush));
  bool blocked = false;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    for (const auto& dropped : state_->queue) state_->queued_bytes -= dropped.size();
    state_->queue.clear();
    blocked = state_->writing;
  }
  state_->changed.notify_all();
  // A writer inside write() to a reader who never reads cannot be woken: joining would hang the launcher's exit.
  // It owns a share of the state, so nothing it touches goes away; the process's exit ends it.
  if (blocked) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void OutputSink::write(std::string data) {
  if (data.empty()) return;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->broken) return;
    state_->queued_bytes += data.size();
    state_->queue.push_back(std::move(data));
  }
  state_->changed.notify_all();
}

bool OutputSink::backlogged() const {
  std::lock_guard lock(state_->mutex);
  return state_->queued_bytes > kHighWater;
}

bool OutputSink::broken() const {
  std::lock_guard lock(state_->mutex);
  return state_->broken;
}

void OutputSink::give_up() {
  std::lock_guard lock(state_->mutex);
  state_->given_up = true;
}

bool OutputSink::flush(const Deadline& deadline) {
  std::unique_lock lock(state_->mutex);
  return state_->changed.wait_until(lock, deadline.when(),
                                    [&] { return state_->broken || state_->queued_bytes == 0; });
}

void OutputSink::writer(int fd, std::shared_ptr<State> state) {
  std::unique_lock lock(state->mutex);
  while (true) {
    state->changed.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
    if (state->stopping) return;  // what is still queued is dropped (see the destructor)
    std::string piece = std::move(state->queue.front());
    state->queue.pop_front();
    state->writing = true;
    lock.unlock();
    std::string_view rest = piece;
    bool failed = false;
    while (!rest.empty()) {
      ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n >= 0) {
        rest.remove_prefix(static_cast<std::size_t>(n));
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        ::usleep(1000);  // our stdout was handed to us non-blocking; this thread may wait
      } else if (errno != EINTR) {
        failed = true;
        break;
      }
    }
    lock.lock();
    state->writing = false;
    state->queued_bytes -= piece.size();
    if (failed) {
      state->broken = true;
      for (const auto& dropped : state->queue) state->queued_bytes -= dropped.size();
      state->queue.clear();
    }
    state->changed.notify_all();
  }
}

}  // namespace pickle::launch
