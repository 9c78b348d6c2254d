#pragma once
// Monotonic clock helpers. Everything that waits in pickle waits against a Deadline, so that no wait can hang.

#include <chrono>
#include <cstdint>
#include <limits>

namespace pickle {

using Clock = std::chrono::steady_clock;

/// The longest wait pickle takes (about 23 days): longer timeouts mean this. It keeps every wait's milliseconds in
/// an int (poll(), the store's u32 wire field) and the clock arithmetic far from overflow; a timeout meant as
/// "forever" (PICKLE_TIMEOUT=1e9 while debugging) must wait long, not wrap around and fail at once.
inline constexpr double kMaxWaitSeconds = 2'000'000.0;

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
  /// `seconds` is clamped to [0, kMaxWaitSeconds].
  static Deadline after_seconds(double seconds) {
    const double clamped = seconds > kMaxWaitSeconds ? kMaxWaitSeconds : (seconds > 0 ? seconds : 0.0);
    return Deadline(std::chrono::milliseconds(static_cast<std::int64_t>(clamped * 1000.0)));
  }
  bool expired() const { return Clock::now() >= end_; }
  /// Milliseconds left, never negative and never above what an int holds: suitable for poll().
  int remaining_ms() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    if (left <= 0) return 0;
    return left < std::numeric_limits<int>::max() ? static_cast<int>(left) : std::numeric_limits<int>::max();
  }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// The point itself, for condition-variable waits.
  Clock::time_point when() const { return end_; }

 private:
  Clock::time_point end_;
  std::chrono::milliseconds timeout_;
};

}  // namespace pickle
