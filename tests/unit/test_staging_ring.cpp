// The words of a staging ring's header that the two ranks of an shm pair share, each through its own mapping: a
// release moves the flags once, whichever rank calls it first (when both ranks failed the pair, a second move left a
// flag 2^31 past what a stream waited for, which the cyclic comparison reads as behind: that stream never went on),
// and the sender's "gave up" word reaches the receiver.
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "device/host/backoff.hpp"
#include "transport/shm/staging_ring.hpp"

namespace pickle::transport::shm {
namespace {

/// A ring as its sender creates it, and as its receiver maps it (here in the same process).
struct RingAndMapping {
  std::unique_ptr<StagingRing> sender, receiver;
};

RingAndMapping ring_and_mapping() {
  RingAndMapping pair;
  pair.sender = StagingRing::create(MemoryKind::Host, 0, 4096, 2);
  device::ExportedMemory exported = pair.sender->export_memory();
  pair.receiver = StagingRing::import(exported.descriptor, std::move(exported.fd), MemoryKind::Host, 0);
  return pair;
}

TEST(StagingRing, AReleaseMovesTheFlagsOnceWhicheverRankCallsIt) {
  RingAndMapping pair = ring_and_mapping();
  pair.sender->release();
  pair.receiver->release();
  pair.sender->release();
  for (int slot = 0; slot < 2; ++slot) {
    // Waits for what the flags held before (0) pass; two moves would read as 2^31 behind them.
    EXPECT_TRUE(pair.receiver->full_reached(slot, 0)) << "slot " << slot;
    EXPECT_TRUE(pair.sender->free_reached(slot, 0)) << "slot " << slot;
    // Moved by 2^30 exactly once.
    EXPECT_TRUE(pair.sender->full_reached(slot, 1u << 30)) << "slot " << slot;
    EXPECT_FALSE(pair.sender->full_reached(slot, (1u << 30) + 1)) << "slot " << slot;
  }
}

TEST(StagingRing, TheSendersGaveUpWordReachesTheReceiver) {
  RingAndMapping pair = ring_and_mapping();
  EXPECT_EQ(device::host::load_acquire(pair.receiver->given_up_word()), 0u);
  pair.sender->mark_given_up();
  EXPECT_NE(device::host::load_acquire(pair.receiver->given_up_word()), 0u);
}

}  // namespace
}  // namespace pickle::transport::shm
