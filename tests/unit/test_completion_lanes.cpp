// The ipc transport's completion lanes on host streams (completion_lanes.hpp): which write goes where, that a write
// on a lane still comes after its copy, that join() orders the stream after it, and that lanes of streams that went
// are let go. Communicators use lanes on CUDA only; the class works on either kind, so that its logic runs here.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "device/host/backoff.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "transport/ipc/completion_lanes.hpp"
#include "poll_for_seconds.hpp"

namespace pickle::transport::ipc {
namespace {

using device::host::load_acquire;

using test::poll_for_seconds;

/// Two host-memory buffers of `bytes` (source with a pattern per message, destination zeroed), words, and a gate
/// word that holds the stream until the test opens it.
struct Messages {
  static constexpr std::size_t kBytes = 256 * 1024 + 3;
  static constexpr int kCount = 6;
  std::vector<std::vector<unsigned char>> sources;
  std::vector<std::vector<unsigned char>> destinations;
  std::vector<std::uint32_t> words = std::vector<std::uint32_t>(kCount, 0);
  std::uint32_t gate = 0;

  Messages() {
    for (int m = 0; m < kCount; ++m) {
      sources.emplace_back(kBytes);
      for (std::size_t i = 0; i < kBytes; ++i) sources.back()[i] = static_cast<unsigned char>((i * 7 + m * 31) & 0xff);
      destinations.emplace_back(kBytes, 0);
    }
  }
  void copy(device::Stream& stream, int m) { stream.copy(destinations[m].data(), sources[m].data(), kBytes); }
  bool arrived(int m) const { return destinations[m] == sources[m]; }
  void open_gate() { std::atomic_ref<std::uint32_t>(gate).store(1, std::memory_order_release); }
};

/// Waits until every lane has run what it was given.
void synchronize_lanes(CompletionLanes& lanes) {
  for (const auto& weak : lanes.streams()) {
    if (auto lane = weak.lock()) lane->synchronize();
  }
}

std::shared_ptr<device::Stream> shared_host_stream() { return device::make_stream(MemoryKind::Host); }

TEST(CompletionLanes, ASendAfterAWrittenOneOrAWaitWritesOnItsOwnStream) {
  CompletionLanes lanes(MemoryKind::Host, 0);
  auto stream = shared_host_stream();
  Messages m;
  // The first write on a stream, and one after a write that has run, go on the stream itself.
  m.copy(*stream, 0);
  EXPECT_FALSE(lanes.write_after(*stream, &m.words[0], &m.words[0], 1).on_lane());
  stream->synchronize();
  m.copy(*stream, 1);
  EXPECT_FALSE(lanes.write_after(*stream, &m.words[1], &m.words[1], 2).on_lane());
  // Behind a wait (the stream is held, so the write before has not run): interrupt() says the send follows a wait.
  stream->wait_value(&m.gate, 1);
  lanes.interrupt(*stream);
  m.copy(*stream, 2);
  EXPECT_FALSE(lanes.write_after(*stream, &m.words[2], &m.words[2], 3).on_lane());
  m.open_gate();
  stream->synchronize();
  EXPECT_EQ(lanes.lane_writes(), 0u);
  EXPECT_EQ(load_acquire(&m.words[0]), 1u);
  EXPECT_EQ(load_acquire(&m.words[1]), 2u);
  EXPECT_EQ(load_acquire(&m.words[2]), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(m.arrived(i)) << "message " << i;
}

TEST(CompletionLanes, ABurstWritesOnTheLaneOnlyAfterEachCopyAndJoinOrdersTheStreamAfterIt) {
  CompletionLanes lanes(MemoryKind::Host, 0);
  auto stream = shared_host_stream();
  Messages m;
  stream->wait_value(&m.gate, 1);  // holds every copy, so that each write is still pending when the next send comes
  std::vector<CompletionLanes::Written> written;
  for (int i = 0; i < Messages::kCount; ++i) {
    m.copy(*stream, i);
    written.push_back(lanes.write_after(*stream, &m.words[i], &m.words[i], 100 + i));
  }
  EXPECT_FALSE(written[0].on_lane());  // nothing before it
  for (int i = 1; i < Messages::kCount; ++i) EXPECT_TRUE(written[i].on_lane()) << "message " << i;
  EXPECT_EQ(lanes.lane_writes(), static_cast<std::uint64_t>(Messages::kCount - 1));
  ASSERT_EQ(lanes.streams().size(), 1u);
  // The lane waits for the stream's point after each copy: held by the gate, nothing is written.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < Messages::kCount; ++i) EXPECT_EQ(load_acquire(&m.words[i]), 0u) << "message " << i;
  // A marker after join(): when the stream reaches it, the lane's writes have run.
  CompletionLanes::join(*stream, written.back());
  std::uint32_t marker = 0;
  std::vector<std::uint32_t> seen_at_marker(Messages::kCount, 0);
  stream->host_callback([&] {
    for (int i = 0; i < Messages::kCount; ++i) seen_at_marker[i] = load_acquire(&m.words[i]);
    marker = 1;
  });
  // Each word, once seen, finds its message's bytes there.
  std::vector<bool> checked(Messages::kCount, false);
  m.open_gate();
  ASSERT_TRUE(poll_for_seconds(10, [&] {
    for (int i = 0; i < Messages::kCount; ++i) {
      if (checked[i] || load_acquire(&m.words[i]) != static_cast<std::uint32_t>(100 + i)) continue;
      EXPECT_TRUE(m.arrived(i)) << "message " << i << "'s word came before its bytes";
      checked[i] = true;
    }
    return std::all_of(checked.begin(), checked.end(), [](bool b) { return b; });
  }));
  stream->synchronize();
  ASSERT_EQ(marker, 1u);
  for (int i = 0; i < Messages::kCount; ++i) {
    EXPECT_EQ(seen_at_marker[i], static_cast<std::uint32_t>(100 + i)) << "message " << i << " not written by the join";
  }
  synchronize_lanes(lanes);
}

TEST(CompletionLanes, JoinAddsNothingPastAWriteItWaitedForAlready) {
  CompletionLanes lanes(MemoryKind::Host, 0);
  auto stream = shared_host_stream();
  Messages m;
  stream->wait_value(&m.gate, 1);
  std::vector<CompletionLanes::Written> written;
  for (int i = 0; i < 3; ++i) {
    m.copy(*stream, i);
    written.push_back(lanes.write_after(*stream, &m.words[i], &m.words[i], 7 + i));
  }
  ASSERT_TRUE(written[1].on_lane());
  ASSERT_TRUE(written[2].on_lane());
  EXPECT_FALSE(CompletionLanes::join(*stream, written[0]));  // written on the stream itself
  EXPECT_TRUE(CompletionLanes::join(*stream, written[2]));
  const std::shared_ptr<CompletionLanes::Lane> lane = written[2].lane.lock();
  ASSERT_NE(lane, nullptr);
  EXPECT_EQ(lane->joined, 2u);
  EXPECT_FALSE(CompletionLanes::join(*stream, written[1]));  // covered by the join above
  m.open_gate();
  stream->synchronize();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(load_acquire(&m.words[i]), static_cast<std::uint32_t>(7 + i));
}

TEST(CompletionLanes, TheLaneOfAStreamThatWentIsLetGoOnceIdle) {
  CompletionLanes lanes(MemoryKind::Host, 0);
  Messages m;
  {
    auto stream = shared_host_stream();
    stream->wait_value(&m.gate, 1);
    for (int i = 0; i < 2; ++i) {
      m.copy(*stream, i);
      lanes.write_after(*stream, &m.words[i], &m.words[i], 1);
    }
    ASSERT_EQ(lanes.streams().size(), 1u);
    m.open_gate();
    stream->synchronize();
    synchronize_lanes(lanes);
  }
  // The next stream that sends makes the map look for lanes of streams that went.
  auto next = shared_host_stream();
  m.copy(*next, 2);
  lanes.write_after(*next, &m.words[2], &m.words[2], 1);
  EXPECT_TRUE(lanes.streams().empty());
  next->synchronize();
}

}  // namespace
}  // namespace pickle::transport::ipc
