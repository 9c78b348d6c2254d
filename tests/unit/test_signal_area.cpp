// The "sent" words of a net send only move forward. Sends that reuse a completion slot finish on different rail
// threads, and the older send's completion can run after the newer one's: the word must keep the newer generation,
// or the newer send never completes (a hang Net.MoreReceivesThanCompletionSlotsReuseThemSafely hit on a loaded host).
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "comm/signal_area.hpp"
#include "device/host/backoff.hpp"

namespace pickle::comm {
namespace {

/// Rank 0's area in a world of two whose peer is on another host: nothing to exchange, so no channels.
SignalArea lone_area() {
  static std::vector<std::optional<device::FdChannel>> channels(2);
  return SignalArea(0, 2, MemoryKind::Host, -1, channels, {true, false}, Deadline::after_seconds(5));
}

TEST(SignalArea, ASentWordNeverMovesBack) {
  SignalArea area = lone_area();
  const int index = kPeerSignalSlots + 7;
  area.advance_sent(1, index, 5);
  area.advance_sent(1, index, 4);  // the older send's completion, late
  EXPECT_EQ(area.load_sent(1, index), 5u);
  area.advance_sent(1, index, 6);
  EXPECT_EQ(area.load_sent(1, index), 6u);
  // Across the wrap, as flag_reached compares generations (each step less than 2^31 ahead).
  area.advance_sent(1, index, 0x70000000u);
  area.advance_sent(1, index, 0xe0000000u);
  area.advance_sent(1, index, 0xffffffffu);
  EXPECT_EQ(area.load_sent(1, index), 0xffffffffu);
  area.advance_sent(1, index, 1);
  area.advance_sent(1, index, 0xfffffffeu);
  EXPECT_EQ(area.load_sent(1, index), 1u);
  EXPECT_EQ(area.load_sent(1, index + 1), 0u);  // its neighbour untouched
}

TEST(SignalArea, RacingCompletionsLeaveTheNewestGeneration) {
  SignalArea area = lone_area();
  const int index = kPeerSignalSlots;
  constexpr std::uint32_t kGenerations = 200000;
  // Two threads complete alternate generations; each waits until the word shows the generation two before its own,
  // so that both are often in flight at once and either may finish last.
  std::vector<std::thread> threads;
  for (std::uint32_t parity = 0; parity < 2; ++parity) {
    threads.emplace_back([&, parity] {
      for (std::uint32_t g = 1 + parity; g <= kGenerations; g += 2) {
        while (g > 2 && !device::host::flag_reached(area.load_sent(1, index), g - 2)) std::this_thread::yield();
        area.advance_sent(1, index, g);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(area.load_sent(1, index), kGenerations);
}

}  // namespace
}  // namespace pickle::comm
