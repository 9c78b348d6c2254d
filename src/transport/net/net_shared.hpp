#pragma once
// What the rails of a NetTransport share (rail.hpp): the messages being written, the matching of arrived chunks to
// expected messages, each peer's health, the statistics. One mutex guards it; rails take it briefly, after their
// own fabric lock when they hold one.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/net_transport.hpp"

namespace pickle::transport::net {

using Callbacks = std::vector<std::function<void()>>;

/// One message being written to a peer; its chunks may be spread over several rails.
struct OutMessage {
  int peer = -1;
  const std::byte* src = nullptr;
  std::size_t bytes = 0;
  RemoteRegion dst;
  std::uint32_t id = 0;
  std::uint64_t chunks = 0;
  std::size_t chunk_bytes = 0;
  std::vector<void*> descs;  // per rail: local registration descriptor (FI_MR_LOCAL providers), else empty
  std::function<void()> on_sent;
  /// Each write carries `id` as remote CQ data; false for the set-up handshake's writes, which the peer's transport
  /// never hears of (they consume no receive and complete no message there).
  bool with_data = true;
  std::atomic<std::uint64_t> completed{0};
  std::shared_ptr<const void> pin;  // keeps the source's registration open while the message lives (FI_MR_LOCAL)
};

/// The chunks of a message one rail posts: first, first + step, first + 2 step, ... below message->chunks.
struct Stripe {
  std::shared_ptr<OutMessage> message;
  std::uint64_t next = 0;
  std::uint64_t step = 1;
  int lane = -1;  // the rail's lane that posts them (the set-up handshake greets every lane); -1: any with room
};

struct Expectation {
  std::uint64_t chunks = 0;
  std::function<void()> on_arrived;
  std::shared_ptr<const void> pin;  // keeps the target's registration open until the message landed or was dropped
  bool owed = false;                // NetTransport::owe: the peer has begun the transfer this message is part of
};

/// One peer as every rail sees it. Guarded by SharedState::mutex except where noted.
struct PeerLink {
  int rank = -1;
  std::uint64_t peer_chunk = 0;  // the peer's chunk size (set before any rail starts, then read-only)
  std::map<std::uint32_t, Expectation> expected;
  std::map<std::uint32_t, std::uint64_t> arrived;  // chunks landed per message id, until its expectation completes
  std::uint64_t unfinished_writes = 0;             // accepted by write(), not yet completed or dropped
  std::size_t owed_expectations = 0;               // expectations marked owed (NetTransport::owe), not yet complete
  std::int64_t last_progress_ns = 0;               // last completion or arrival, or when a write came to an idle peer
  std::atomic<bool> failed{false};                 // written under the mutex, read by rails without it
  int rails_open = 0;                              // rails whose endpoints to the peer are still open
  bool report_failure = true;                      // false when the owner failed the peer itself (release)
  std::string failure;                             // why it failed, for on_peer_failed
  std::atomic<unsigned> next_rail{0};              // rotates the rail of a message's first chunk
};

class SharedState {
 public:
  SharedState(int rank, double timeout_seconds, NetTransport::PeerFailed on_peer_failed)
      : rank_(rank), timeout_seconds_(timeout_seconds), on_peer_failed_(std::move(on_peer_failed)) {}

  std::mutex mutex;
  std::vector<std::unique_ptr<PeerLink>> peers;  // by rank; nullptr for self and unused ranks
  Callbacks ready;                               // due callbacks found by API calls (run by rail 0)
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> operations{0};
  /// True until the transport's constructor has connected every lane: a peer that fails before then makes the
  /// constructor throw, and on_peer_failed (the owner is still being built) is not called for it. Guarded by mutex.
  bool setting_up = true;
  /// Wakes every rail's thread (set by the transport once the rails exist): a peer failed, callbacks are due.
  std::function<void()> wake_rails;

  PeerLink* peer(int rank) const {
    return rank >= 0 && rank < static_cast<int>(peers.size()) ? peers[static_cast<std::size_t>(rank)].get() : nullptr;
  }
  int rank() const noexcept { return rank_; }

  /// A chunk of `message` from `peer` landed (a rail read its remote CQ data).
  void on_arrival(int peer, std::uint32_t message, Callbacks& callbacks);
  /// A rail completed one write of `message` of `bytes` bytes: counts it and queues on_sent after the last chunk.
  void on_write_completed(OutMessage& message, std::size_t bytes, Callbacks& callbacks);
  /// Something completed for `peer`: it is alive.
  void touch(int peer);
  /// Marks `peer` failed (once: later calls return false) and drops its expectations and pending writes' callbacks.
  /// Every rail then closes its endpoints to the peer and calls rail_closed. `report` false: the owner failed the
  /// peer (NetTransport::release) and already knows, so on_peer_failed is not called and the log line is a debug one.
  bool fail(int peer, const std::string& reason, bool report = true);
  /// A rail closed its endpoints to a failed peer; after the last one, on_peer_failed is queued (with a message
  /// naming rank and peer): by then no provider touches a buffer of the peer's dropped operations.
  void rail_closed(int peer, Callbacks& callbacks);
  /// Whether every rail has closed its endpoints to `peer` (a failed one).
  bool closed(int peer);
  /// Whether every failed peer's endpoints are closed: until then a failed peer's late writes may still land, in
  /// registrations whose operations were dropped (and unpinned) with it, so none of freed memory may be closed
  /// (RegistrationCache). A live peer writes only into what an expectation pins.
  bool failed_peers_closed();
  /// Fails the peers that owe progress (owes_progress) and made none for the timeout; true if it failed any.
  bool check_timeouts();
  /// Whether the peer has operations pending (state mutex held): the rails poll sooner while it does.
  bool has_pending(const PeerLink& link) const { return link.unfinished_writes > 0 || !link.expected.empty(); }
  /// Whether the peer owes us progress (state mutex held): writes not yet completed, messages of which some chunks
  /// landed and others not yet, or messages the owner marked owed (the later pieces of a transfer whose first piece
  /// landed: NetTransport::owe). Only then does silence for PICKLE_TIMEOUT fail it. A receive expected long before
  /// the peer sends is not a fault (a rank may post early and compute for minutes); a peer that dies meanwhile is
  /// found by its control channel closing, and the waiting Request by its own timeout.
  bool owes_progress(const PeerLink& link) const {
    return link.unfinished_writes > 0 || !link.arrived.empty() || link.owed_expectations > 0;
  }

 private:
  int rank_;
  double timeout_seconds_;
  NetTransport::PeerFailed on_peer_failed_;
};

}  // namespace pickle::transport::net
