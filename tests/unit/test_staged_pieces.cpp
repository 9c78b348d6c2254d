// comm::staged_piece_bytes (src/comm/staged_pieces.hpp): a staged net send's pieces are whole chunks, at least the
// 4 MiB floor, and never more than kMaxStagedPieces, so that the stream operations one send queues stay bounded.
#include <gtest/gtest.h>

#include <string>

#include "comm/staged_pieces.hpp"

namespace pickle::comm {
namespace {

TEST(StagedPieces, WholeChunksAtLeastTheFloorAndAtMostEightPerSend) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  for (std::size_t chunk : {std::size_t{4096}, std::size_t{65536}, std::size_t{262144}, kMiB, 3 * kMiB, 64 * kMiB}) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, 4 * kMiB - 1, 4 * kMiB, 16 * kMiB, 32 * kMiB,
                              32 * kMiB + 1, 40 * kMiB + 5, 256 * kMiB, kMiB << 10, std::size_t{16} << 30}) {
      const std::size_t piece = staged_piece_bytes(bytes, chunk);
      const std::string where = "bytes " + std::to_string(bytes) + ", chunk " + std::to_string(chunk);
      EXPECT_EQ(piece % chunk, 0u) << where;
      EXPECT_GE(piece, chunk) << where;
      EXPECT_GE(piece + chunk, kStagingPieceBytes) << where;  // the floor, rounded down to whole chunks
      EXPECT_LE((bytes + piece - 1) / piece, kMaxStagedPieces) << where;
    }
  }
}

TEST(StagedPieces, MessagesUpToEightFloorPiecesKeepTheFloor) {
  // What the 4 MiB pieces were before the cap: messages up to 32 MiB are cut as they were.
  EXPECT_EQ(staged_piece_bytes(16u << 20, 65536), 4u << 20);
  EXPECT_EQ(staged_piece_bytes(32u << 20, 65536), 4u << 20);
  EXPECT_EQ(staged_piece_bytes((32u << 20) + 1, 65536), (4u << 20) + 65536);
  EXPECT_EQ(staged_piece_bytes(256u << 20, 262144), 32u << 20);
}

}  // namespace
}  // namespace pickle::comm
