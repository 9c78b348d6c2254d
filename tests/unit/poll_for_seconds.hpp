#pragma once
// A bounded poll for the unit tests that watch another thread's progress (a host stream's worker).

#include <chrono>
#include <thread>

#include "core/clock.hpp"

namespace pickle::test {

/// Calls `done` until it returns true (then true) or `seconds` passed (then false).
template <class Done>
bool poll_for_seconds(double seconds, Done&& done) {
  const Deadline deadline = Deadline::after_seconds(seconds);
  while (!done()) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace pickle::test
