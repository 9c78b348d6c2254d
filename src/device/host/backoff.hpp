#pragma once
// Waiting on a flag in shared memory without a kernel object to sleep on: spin briefly (a peer that is about to
// write answers within microseconds), then yield, then sleep with a growing interval so that an idle wait costs
// almost no CPU (CI machines have 2 cores shared by several ranks).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace pickle::device::host {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Call pause() between polls; each call waits a little longer than the last.
class Backoff {
 public:
  void pause() {
    if (polls_ < kSpins) {
      ++polls_;
      cpu_relax();
    } else if (polls_ < kSpins + kYields) {
      ++polls_;
      std::this_thread::yield();
    } else {
      sleep_ = sleep_ < kMinSleep ? kMinSleep : (sleep_ * 2 > kMaxSleep ? kMaxSleep : sleep_ * 2);
      std::this_thread::sleep_for(sleep_);
    }
  }

 private:
  static constexpr int kSpins = 1000;
  static constexpr int kYields = 200;
  static constexpr std::chrono::microseconds kMinSleep{20};
  static constexpr std::chrono::microseconds kMaxSleep{1000};
  int polls_ = 0;
  std::chrono::microseconds sleep_{0};
};

/// A flag's value, read from the host with acquire order (what the writer wrote before it is visible after).
inline std::uint32_t load_acquire(const std::uint32_t* addr) noexcept {
  // atomic_ref needs a non-const object; the load does not write.
  return std::atomic_ref<std::uint32_t>(*const_cast<std::uint32_t*>(addr)).load(std::memory_order_acquire);
}

/// CU_STREAM_WAIT_VALUE_GEQ's comparison, shared by both backends: `current` is at or past `target` when the signed
/// distance between them is non-negative, so counters keep working when they wrap around 2^32.
constexpr bool flag_reached(std::uint32_t current, std::uint32_t target) noexcept {
  return static_cast<std::int32_t>(current - target) >= 0;
}

}  // namespace pickle::device::host
