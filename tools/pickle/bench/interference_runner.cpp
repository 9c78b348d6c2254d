#include "interference_runner.hpp"

#include <chrono>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "cuda_device.hpp"

namespace pickle::bench {

TrafficRunner::TrafficRunner(Traffic& traffic, const void* send, void* recv, std::size_t bytes, int depth, int device,
                             std::string what, double timeout_seconds)
    : traffic_(traffic),
      send_(send),
      recv_(recv),
      bytes_(bytes),
      depth_(static_cast<std::uint64_t>(depth < 1 ? 1 : depth)),
      device_(device),
      what_(std::move(what)),
      timeout_seconds_(timeout_seconds) {
  completions_.reserve(1 << 16);
}

TrafficRunner::~TrafficRunner() { stop_and_join(); }

void TrafficRunner::stop_and_join() noexcept {
  abort_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void TrafficRunner::start() { thread_ = std::thread([this] { loop(); }); }

void TrafficRunner::rethrow_failure() {
  std::lock_guard lock(failure_mutex_);
  if (failure_) std::rethrow_exception(failure_);
}

bool TrafficRunner::commit_post() {
  std::lock_guard lock(post_mutex_);
  // Before halt(): keep the ring full. Halted: post nothing until the agreed target is known, then up to it.
  if (target_ ? posted_ >= *target_ : halt_requested_) return false;
  ++posted_;
  return true;
}

void TrafficRunner::loop() {
  try {
    if (device_ >= 0) bind_cuda_device(device_);
    Stopwatch since_progress;
    std::uint64_t posted = 0, retired = 0;
    int idle = 0;
    while (!abort_.load(std::memory_order_acquire)) {
      bool progress = false;
      while (posted - retired < depth_ && commit_post()) {
        ++posted;
        traffic_.post(send_, recv_, bytes_);  // may block until the peer makes the same (collective) call
        progress = true;
      }
      if (posted > retired && traffic_.oldest_done()) {
        const std::int64_t now = now_ns();
        traffic_.retire_oldest();
        completions_.push_back(now);
        if (retired == 0) first_ns_.store(now, std::memory_order_release);
        completed_.store(++retired, std::memory_order_release);
        progress = true;
      }
      {
        std::lock_guard lock(post_mutex_);
        if (target_ && retired == *target_) break;
      }
      if (progress) {
        since_progress.reset();
        idle = 0;
        continue;
      }
      if (posted > retired && since_progress.seconds() > timeout_seconds_) {
        throw TimeoutError(cat(what_, ": message ", retired + 1, " of ", posted, " posted did not complete within ",
                               timeout_seconds_, " s (PICKLE_TIMEOUT)"));
      }
      // Spin briefly while work is about to finish (the completion time is read from this loop), then nap: a thread
      // that spins on the driver for seconds must not be what slows the foreground down.
      if (++idle > 256) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  } catch (...) {
    std::lock_guard lock(failure_mutex_);
    failure_ = std::current_exception();
  }
  finished_.store(true, std::memory_order_release);
}

std::uint64_t TrafficRunner::halt() {
  rethrow_failure();
  std::lock_guard lock(post_mutex_);
  halt_requested_ = true;
  return posted_;
}

void TrafficRunner::drain(std::uint64_t target, const Deadline& deadline) {
  {
    std::lock_guard lock(post_mutex_);
    target_ = target;
  }
  while (!finished_.load(std::memory_order_acquire)) {
    if (deadline.expired()) {
      stop_and_join();
      throw TimeoutError(cat(what_, ": ", completed(), " of ", target, " messages completed before the deadline"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (thread_.joinable()) thread_.join();
  rethrow_failure();
}

}  // namespace pickle::bench
