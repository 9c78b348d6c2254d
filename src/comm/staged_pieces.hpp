#pragma once
// How a staged net send (GPU memory over a transport that registers host memory only, docs/rdma.md) is cut into
// pieces. Each piece puts three operations on the send's stream: the copy into the pinned buffer, and the write and
// wait of the host callback that hands the piece to the transport. A CUDA stream holds about a thousand queued
// operations; past that, the call that enqueues blocks until the stream runs. Behind a stream that waits for the
// host (a benchmark's gate, a consumer's wait on a signal) that is a hang: with fixed 4 MiB pieces, ten 256 MiB
// sends queued 1920 operations (`pickle bench p2p` over net on two H200s, docs/results/2026-11-28-h200x4.md). So a
// send has at most kMaxStagedPieces pieces, larger ones for larger messages.

#include <algorithm>
#include <cstddef>

namespace pickle::comm {

/// Pieces of at least this size: large enough for the copy engine to run near its rate, small enough that a 16 MiB
/// message's copy overlaps its writes.
inline constexpr std::size_t kStagingPieceBytes = std::size_t{4} << 20;
/// The most pieces of one staged send.
inline constexpr std::size_t kMaxStagedPieces = 8;
/// Stream operations per piece: the copy, and the host callback's write and wait.
inline constexpr int kStreamOpsPerStagedPiece = 3;

/// The piece size of a staged send of `bytes` whose transport writes `chunk`-byte chunks: a whole number of chunks
/// (so the receiver counts the same chunks as for one write), at least kStagingPieceBytes (rounded to chunks), and
/// large enough that `bytes` takes at most kMaxStagedPieces pieces. `chunk` > 0.
inline std::size_t staged_piece_bytes(std::size_t bytes, std::size_t chunk) {
  const std::size_t floor = std::max<std::size_t>(1, kStagingPieceBytes / chunk) * chunk;
  const std::size_t spread = (bytes + kMaxStagedPieces - 1) / kMaxStagedPieces;  // bytes over the most pieces
  const std::size_t spread_in_chunks = (spread + chunk - 1) / chunk * chunk;
  return std::max(floor, spread_in_chunks);
}

}  // namespace pickle::comm
