// comm::send_ring (src/comm/send_ring.hpp): a staged net send's pieces are whole chunks of about 2 MiB, and its ring
// has enough slots for twice what the lanes keep in flight, within 3..16 and never more than there are pieces.
#include <gtest/gtest.h>

#include <string>

#include "comm/send_ring.hpp"

namespace pickle::comm {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(SendRing, WholeChunksBoundedSlotsAndEveryByteInAPiece) {
  for (std::size_t chunk : {std::size_t{4096}, std::size_t{65536}, kMiB, 3 * kMiB, 64 * kMiB}) {
    for (std::size_t lanes : {std::size_t{1}, std::size_t{4}, std::size_t{64}}) {
      for (std::size_t bytes : {std::size_t{1}, 2 * kMiB - 1, 2 * kMiB, 2 * kMiB + 1, 40 * kMiB + 5, kMiB << 10,
                                std::size_t{16} << 30}) {
        const SendRing ring = send_ring(bytes, chunk, lanes, 4);
        const std::string where =
            "bytes " + std::to_string(bytes) + ", chunk " + std::to_string(chunk) + ", lanes " + std::to_string(lanes);
        EXPECT_EQ(ring.piece_bytes % chunk, 0u) << where;
        EXPECT_GE(ring.piece_bytes, chunk) << where;
        EXPECT_LE(ring.piece_bytes, std::max(chunk, kSendRingPieceBytes)) << where;
        EXPECT_GE(ring.pieces * ring.piece_bytes, bytes) << where;        // every byte in a piece
        EXPECT_LT((ring.pieces - 1) * ring.piece_bytes, bytes) << where;  // and no empty piece
        EXPECT_GE(ring.slots, 1u) << where;
        EXPECT_LE(ring.slots, kSendRingMaxSlots) << where;
        EXPECT_LE(ring.slots, ring.pieces) << where;
        if (ring.pieces >= kSendRingMinSlots) {
          EXPECT_GE(ring.slots, kSendRingMinSlots) << where;
        }
      }
    }
  }
}

TEST(SendRing, SlotsCoverTwiceWhatTheLanesHaveInFlight) {
  // The defaults (1 MiB chunks, 4 in flight): one lane keeps 4 MiB on the wire, so 8 MiB are staged ahead.
  EXPECT_EQ(send_ring(kMiB << 10, kMiB, 1, 4).slots, 4u);
  EXPECT_EQ(send_ring(kMiB << 10, kMiB, 1, 4).piece_bytes, 2 * kMiB);
  EXPECT_EQ(send_ring(kMiB << 10, kMiB, 1, 4).pieces, 512u);
  EXPECT_EQ(send_ring(kMiB << 10, kMiB, 2, 4).slots, 8u);
  EXPECT_EQ(send_ring(kMiB << 10, kMiB, 4, 4).slots, 16u);
  EXPECT_EQ(send_ring(kMiB << 10, kMiB, 8, 4).slots, kSendRingMaxSlots);  // bounded
  // Small chunks (the CPU tests: 64 KiB): the floor of 3 slots.
  EXPECT_EQ(send_ring(64 * kMiB, 65536, 2, 4).slots, kSendRingMinSlots);
  // A message of one piece takes one slot.
  EXPECT_EQ(send_ring(4096, kMiB, 4, 4).slots, 1u);
  EXPECT_EQ(send_ring(4096, kMiB, 4, 4).pieces, 1u);
  // A chunk larger than the piece size: one chunk per piece.
  EXPECT_EQ(send_ring(64 * kMiB, 8 * kMiB, 1, 4).piece_bytes, 8 * kMiB);
}

}  // namespace
}  // namespace pickle::comm
