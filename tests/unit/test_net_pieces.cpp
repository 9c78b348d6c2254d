// comm::net_piece_bytes (src/comm/net_pieces.hpp): a net message's pieces are at least the 4 MiB floor, whole MiB
// above it, never more than kMaxNetPieces (stream operations per send stay bounded, the piece index fits its bits),
// and cover the message exactly.
#include <gtest/gtest.h>

#include <string>

#include "comm/net_pieces.hpp"

namespace pickle::comm {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(NetPieces, AtLeastTheFloorWholeMiBAndAtMostEightPerMessage) {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, 4 * kMiB - 1, 4 * kMiB, 4 * kMiB + 1, 16 * kMiB,
                            32 * kMiB, 32 * kMiB + 1, 40 * kMiB + 5, 256 * kMiB, kMiB << 10, std::size_t{16} << 30,
                            (std::size_t{16} << 30) + 12345}) {
    const std::size_t piece = net_piece_bytes(bytes);
    const std::size_t count = net_piece_count(bytes);
    const std::string where = "bytes " + std::to_string(bytes);
    EXPECT_GE(piece, kNetPieceFloorBytes) << where;
    EXPECT_EQ(piece % kNetPieceAlignBytes, 0u) << where;
    EXPECT_GE(count, 1u) << where;
    EXPECT_LE(count, kMaxNetPieces) << where;
    EXPECT_LT((count - 1) * piece, bytes) << where;  // the last piece is not empty
    EXPECT_GE(count * piece, bytes) << where;        // and the pieces cover the message
  }
}

TEST(NetPieces, PiecesFollowOneAnotherAndEndAtTheMessagesEnd) {
  for (std::size_t bytes : {std::size_t{1}, 4 * kMiB, 4 * kMiB + 1, 32 * kMiB + 1, 40 * kMiB + 5, kMiB << 10}) {
    std::size_t next = 0;
    for (std::size_t i = 0; i < net_piece_count(bytes); ++i) {
      const NetPiece part = net_piece(bytes, i);
      EXPECT_EQ(part.offset, next) << "bytes " << bytes << ", piece " << i;
      EXPECT_GT(part.length, 0u) << "bytes " << bytes << ", piece " << i;
      EXPECT_LE(part.length, net_piece_bytes(bytes)) << "bytes " << bytes << ", piece " << i;
      next = part.offset + part.length;
    }
    EXPECT_EQ(next, bytes);
  }
  EXPECT_EQ(net_piece(32 * kMiB + 1, 6).length, 2 * kMiB + 1);  // 6 pieces of 5 MiB, then the rest
}

TEST(NetPieces, SmallMessagesAreOnePieceAndLargeOnesSpreadOverEight) {
  EXPECT_EQ(net_piece_count(1), 1u);
  EXPECT_EQ(net_piece_count(4 * kMiB), 1u);
  EXPECT_EQ(net_piece_count(4 * kMiB + 1), 2u);
  EXPECT_EQ(net_piece_bytes(16 * kMiB), 4 * kMiB);  // up to 32 MiB the floor: 16 MiB is 4 pieces of 4 MiB
  EXPECT_EQ(net_piece_bytes(32 * kMiB), 4 * kMiB);
  EXPECT_EQ(net_piece_bytes(32 * kMiB + 1), 5 * kMiB);  // then whole MiB: 7 pieces
  EXPECT_EQ(net_piece_count(32 * kMiB + 1), 7u);
  EXPECT_EQ(net_piece_bytes(kMiB << 10), 128 * kMiB);  // 1 GiB: 8 pieces of 128 MiB
  EXPECT_EQ(net_piece_count(kMiB << 10), 8u);
}

}  // namespace
}  // namespace pickle::comm
