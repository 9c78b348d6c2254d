// The words of a staging ring's header that the two ranks of an shm pair share, each through its own mapping: a
// release raises the flags to one target, whichever rank calls it and however often (when both ranks failed the
// pair, a second move of 2^30 left a flag 2^31 past what a stream waited for, which the cyclic comparison reads as
// behind: that stream never went on; and a single move let a stream's later write of an older use stop the other
// rank's stream for good), and the sender's "gave up" word reaches the receiver.
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "device/host/backoff.hpp"
#include "device/stream.hpp"
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

TEST(StagingRing, ReleasesByEitherRankRaiseTheFlagsToOneTarget) {
  RingAndMapping pair = ring_and_mapping();
  pair.sender->release();
  pair.receiver->release();
  pair.sender->release();
  for (int slot = 0; slot < 2; ++slot) {
    // Waits for what the flags held before (0) pass; two moves would read as 2^31 behind them.
    EXPECT_TRUE(pair.receiver->full_reached(slot, 0)) << "slot " << slot;
    EXPECT_TRUE(pair.sender->free_reached(slot, 0)) << "slot " << slot;
    // At 2^30 past the highest flag of the first release (0 here), not further.
    EXPECT_TRUE(pair.sender->full_reached(slot, 1u << 30)) << "slot " << slot;
    EXPECT_FALSE(pair.sender->full_reached(slot, (1u << 30) + 1)) << "slot " << slot;
  }
}

TEST(StagingRing, AReleaseRaisesAgainWhatAStreamWroteBackBelowItsTarget) {
  RingAndMapping pair = ring_and_mapping();
  pair.sender->release();
  // A stream still running through the released ring writes the use of a chunk it had queued before the release.
  std::unique_ptr<device::Stream> stream = device::make_stream(MemoryKind::Host, 0);
  stream->write_value(pair.sender->full_for_streams(1), 5);
  stream->synchronize();
  EXPECT_FALSE(pair.receiver->full_reached(1, 6));  // a wait for the next use would stop there
  pair.receiver->release();                         // the other rank's release, later
  EXPECT_TRUE(pair.receiver->full_reached(1, 6));
  EXPECT_TRUE(pair.receiver->full_reached(1, 1u << 30));       // back at the first release's target,
  EXPECT_FALSE(pair.receiver->full_reached(1, (1u << 30) + 1));  // not past it
}

TEST(StagingRing, TheSendersGaveUpWordReachesTheReceiver) {
  RingAndMapping pair = ring_and_mapping();
  EXPECT_EQ(device::host::load_acquire(pair.receiver->given_up_word()), 0u);
  pair.sender->mark_given_up();
  EXPECT_NE(device::host::load_acquire(pair.receiver->given_up_word()), 0u);
}

}  // namespace
}  // namespace pickle::transport::shm
