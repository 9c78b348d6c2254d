#pragma once
// How a send over the net transport is cut into pieces, each a message of its own to the transport (its own id, its
// own completion at the receiver). Both sides cut a message of `bytes` the same way, from the size alone.
//
// Why pieces: a staged receive (GPU memory over a transport that registers host memory only, docs/rdma.md) copies
// each piece into place as soon as it landed, while later pieces are still on the wire; as one message, the whole
// copy came after the last chunk (about 20 ms of a 1 GiB message's 200 ms over one tcp lane). A staged send copies
// each piece into its pinned buffer on the send's stream and hands it to the transport while the next is copied.
//
// Why at most kMaxNetPieces: each piece puts up to three operations on the send's stream (the copy, and the write
// and wait of the host callback that hands it to the transport). A CUDA stream holds about a thousand queued
// operations; past that, the call that enqueues blocks until the stream runs. Behind a stream that waits for the host
// (a benchmark's gate, a consumer's wait on a signal) that is a hang: with fixed 4 MiB pieces, ten 256 MiB sends
// queued 1920 operations (`pickle bench p2p` over net on two H200s, docs/results/2026-11-28-h200x4.md). So larger
// messages get larger pieces. The piece index also takes 3 bits of the message id (Impl::net_recv_message).

#include <algorithm>
#include <cstddef>

namespace pickle::comm {

/// Pieces of at least this size: large enough for the copy engine to run near its rate, small enough that a 16 MiB
/// message's copies overlap its writes. Messages up to this size are one piece (no extra cost for small messages).
inline constexpr std::size_t kNetPieceFloorBytes = std::size_t{4} << 20;
/// Larger pieces are whole MiB, so that every chunk of a piece is full-sized for chunk sizes that divide 1 MiB
/// (correctness does not depend on it: the receiver counts each piece's chunks at the sender's chunk size).
inline constexpr std::size_t kNetPieceAlignBytes = std::size_t{1} << 20;
/// The most pieces of one message (the piece index has 3 bits in the message id).
inline constexpr std::size_t kMaxNetPieces = 8;
/// Stream operations per piece of a staged send: the copy, and the host callback's write and wait.
inline constexpr int kStreamOpsPerNetPiece = 3;

/// The piece size of a net message of `bytes` (> 0): at least kNetPieceFloorBytes, whole MiB, and large enough that
/// the message takes at most kMaxNetPieces pieces. The last piece may be shorter.
inline std::size_t net_piece_bytes(std::size_t bytes) {
  const std::size_t spread = (bytes + kMaxNetPieces - 1) / kMaxNetPieces;  // bytes over the most pieces
  const std::size_t aligned = (spread + kNetPieceAlignBytes - 1) / kNetPieceAlignBytes * kNetPieceAlignBytes;
  return std::max(kNetPieceFloorBytes, aligned);
}

/// How many pieces a net message of `bytes` (> 0) has: 1 to kMaxNetPieces.
inline std::size_t net_piece_count(std::size_t bytes) {
  const std::size_t piece = net_piece_bytes(bytes);
  return (bytes + piece - 1) / piece;
}

/// Where piece `index` (< net_piece_count(bytes)) of a net message of `bytes` starts, and how long it is.
struct NetPiece {
  std::size_t offset = 0;
  std::size_t length = 0;
};
inline NetPiece net_piece(std::size_t bytes, std::size_t index) {
  const std::size_t piece = net_piece_bytes(bytes);
  const std::size_t offset = index * piece;
  return {offset, std::min(piece, bytes - offset)};
}

}  // namespace pickle::comm
