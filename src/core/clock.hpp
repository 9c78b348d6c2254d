#pragma once
// Monotonic clock helpers. Everything that waits in pickle waits against a Deadline, so that no wait can hang.

#include <chrono>
#include <cstdint>

namespace pickle {

using Clock = std::chrono::steady_clock;

/// Nanoseconds on the monotonic clock.
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

/// Seconds elapsed since construction (or the last reset).
class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double micros() const { return seconds() * 1e6; }

 private:
  Clock::time_point start_;
};

/// A point in time after which a wait gives up.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds timeout) : end_(Clock::now() + timeout), timeout_(timeout) {}
  static Deadline after_seconds(double seconds) {
    return Deadline(std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0)));
  }
  bool expired() const { return Clock::now() >= end_; }
  /// Milliseconds left, never negative: suitable for poll().
  int remaining_ms() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
  }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  Clock::time_point end_;
  std::chrono::milliseconds timeout_;
};

}  // namespace pickle
