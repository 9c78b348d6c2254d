#pragma once
// How a staged net send (GPU memory over a transport that registers host memory only, docs/rdma.md) goes through
// pinned memory: a ring of a few pieces, each copied out of the source by the copy engine when an earlier piece's
// writes have completed, and written from there. The bytes stay in the CPU's caches between the copy and the socket
// (or NIC) that reads them: copied far ahead of the wire, as when the whole message was staged at once, a tcp lane's
// kernel copy read them from memory and moved 4.3 GB/s where a cached source gives 5.5-5.9
// (docs/results/2026-11-28d-h200x2.md). And the pinned memory a send holds is bounded, not the message's size.

#include <algorithm>
#include <cstddef>

namespace pickle::comm {

/// Pieces of about this size: large enough for the copy engine to run near its rate (a 2 MiB device-to-host copy
/// takes ~40 us), small enough that a ring of them stays in the CPU's caches.
inline constexpr std::size_t kSendRingPieceBytes = std::size_t{2} << 20;
/// The fewest and most pieces of a ring.
inline constexpr std::size_t kSendRingMinSlots = 3;
inline constexpr std::size_t kSendRingMaxSlots = 16;

struct SendRing {
  std::size_t piece_bytes = 0;  ///< bytes per piece: whole chunks, so the receiver counts the chunks of one write
  std::size_t slots = 0;        ///< pinned buffers of piece_bytes that the pieces take in turn
  std::size_t pieces = 0;       ///< pieces of the message (the last may be short); at least 1
};

/// The ring of a staged send of `bytes` whose transport writes `chunk`-byte chunks over `lanes` lanes with
/// `inflight` writes in flight on each (all > 0): pieces of kSendRingPieceBytes rounded down to whole chunks (at
/// least one chunk), and enough slots to keep twice what the lanes have in flight copied ahead of the wire (so that
/// a piece's copy hides behind the writes of the others), within kSendRingMinSlots..kSendRingMaxSlots and never more
/// than the message has pieces.
inline SendRing send_ring(std::size_t bytes, std::size_t chunk, std::size_t lanes, std::size_t inflight) {
  SendRing ring;
  ring.piece_bytes = std::max<std::size_t>(1, kSendRingPieceBytes / chunk) * chunk;
  ring.pieces = std::max<std::size_t>(1, (bytes + ring.piece_bytes - 1) / ring.piece_bytes);
  const std::size_t on_the_wire = lanes * inflight * chunk;
  const std::size_t wanted = (2 * on_the_wire + ring.piece_bytes - 1) / ring.piece_bytes;
  ring.slots = std::min(std::clamp(wanted, kSendRingMinSlots, kSendRingMaxSlots), ring.pieces);
  return ring;
}

}  // namespace pickle::comm
