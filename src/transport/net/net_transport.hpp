#pragma once
// The net transport: ranks on different hosts (or forced with PICKLE_TRANSPORT=net) move host memory with libfabric
// reliable-datagram endpoints. A message is a series of RMA writes of PICKLE_NET_CHUNK bytes, striped over
// PICKLE_NET_LANES endpoints per peer (the QP count of an RDMA library), several writes in flight per lane; every
// write carries the message id as remote CQ data (the WRITE_WITH_IMM pattern), so the receiver learns that a
// message has landed by counting its chunks, with no extra message and no polling of the data.
//
// Host memory only: GPU memory is staged through pinned host bounce buffers by the caller (docs/rdma.md).
// Progress threads ("rails", rail.hpp: one for NIC providers, one per lane and direction for providers that move
// bytes with the CPU, such as tcp) post the writes, poll the completion queues, repost the receive buffers some
// providers need for CQ data, watch for silent peers and run the callbacks. Callbacks may therefore run on different
// threads, at the same time: they must be thread-safe, short, and must not destroy the transport. This header
// includes no libfabric header, so that it can be included wherever PICKLE_HAVE_LIBFABRIC is defined.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>

#include "core/clock.hpp"
#include "transport/net/net_options.hpp"

namespace pickle::transport::net {

/// What a writer needs to RMA-write into memory a peer exposed: the address as the provider wants it (a virtual
/// address, or an offset into the registration for providers without FI_MR_VIRT_ADDR) and the registration's key.
/// Plain data: the caller carries it to the writer (the communicator's control channel).
struct RemoteRegion {
  std::uint64_t addr = 0;
  std::uint64_t key = 0;
};

/// Every provider and domain that fi_getinfo offers for the net transport's needs (RDM endpoints, RMA writes, remote
/// CQ data), "net (eth0, lo), shm (shm), tcp;ofi_rxm (eth0, lo)", or "none": for `pickle info` and error messages.
std::string offered_providers();

class NetTransport {
 public:
  /// Called (on a progress thread) once per failed peer: its endpoint reported an error, or it made no progress
  /// for PICKLE_TIMEOUT seconds while it owed some (unfinished writes, partly landed messages; a message merely
  /// expected is not owed). Its pending writes and expected messages
  /// are dropped without their callbacks; later write/expect calls for it throw PeerError. Not called for a peer that
  /// the owner failed first (release()), nor for one that failed during set-up (the constructor throws instead).
  using PeerFailed = std::function<void(int peer, const std::string& reason)>;

  /// Collective over this rank and every peer with `uses[peer]` (each pair's two sides both construct): chooses
  /// the provider (provider.hpp), opens `options.lanes` endpoints per peer, publishes their addresses in `store`
  /// under `key_prefix` (unique per transport within the job: keys are never deleted), inserts the peers' ones and
  /// connects every lane (a handshake write each way, docs/rdma.md: so it returns once every peer's transport runs),
  /// all bounded by `deadline`. Errors: UnavailableError (provider or interface missing, naming what fi_getinfo
  /// offers), InvalidArgument (options, or ranks that chose different providers or lane counts), TimeoutError (a
  /// peer that never published, or whose lanes did not connect), PeerError (a handshake write the provider failed).
  NetTransport(int rank, int world, const std::vector<bool>& uses, Store& store, const std::string& key_prefix,
               const NetOptions& options, const Deadline& deadline, PeerFailed on_peer_failed);
  /// Stops the progress threads and closes every endpoint: pending operations are dropped without callbacks.
  ~NetTransport();
  NetTransport(const NetTransport&) = delete;
  NetTransport& operator=(const NetTransport&) = delete;

  bool uses(int peer) const;
  /// "tcp;ofi_rxm on lo (fabric 127.0.0.1/32), 4 lanes, 512 KiB chunks".
  std::string description() const;
  const NetOptions& options() const;

  /// Makes [ptr, ptr + bytes) writable by peers and returns what a writer needs. `ptr` must lie in a pickle host
  /// allocation (device::allocate); the whole allocation is registered once and later calls for any part of it
  /// register nothing (stats().ipc_opens / cache_hits count them). InvalidArgument for other memory.
  RemoteRegion expose(const void* ptr, std::size_t bytes);

  /// Sends `bytes` from `src` into `dst` of `peer`: ceil(bytes / chunk) RMA writes (one zero-length write for 0
  /// bytes) spread over the lanes, each carrying `message` as remote CQ data. Returns at once; `on_sent` runs on
  /// a progress thread once every write completed locally (the source may then be reused). `message` must not be
  /// reused towards `peer` before the receiver's on_arrived for it ran. A 0-byte message still names a region the
  /// receiver exposed (some providers check its key). PeerError when the peer already failed,
  /// InvalidArgument for a bad peer or buffer, the registration's error when the provider refuses the source
  /// (FI_MR_LOCAL providers). A write that throws has handed nothing to the provider: none of it will land.
  void write(int peer, const void* src, std::size_t bytes, RemoteRegion dst, std::uint32_t message,
             std::function<void()> on_sent);

  /// Receiver side: `on_arrived` runs on a progress thread once all chunks of `message` from `peer` (a message of
  /// `bytes`, cut at the sender's chunk size) have landed; it may be called before or after they arrive.
  /// InvalidArgument when `message` from `peer` is already expected, PeerError when the peer already failed.
  /// `target` (any byte of the exposed memory the message lands in; null for a window, which lives as long as the
  /// transport) keeps that memory's registration open until the message landed or was dropped, even if the
  /// application frees the memory meanwhile.
  void expect(int peer, std::uint32_t message, std::size_t bytes, std::function<void()> on_arrived,
              const void* target = nullptr);
  /// Receiver side: `message` from `peer` will never come (its send failed): drops its expectation, without running
  /// its callback, so that the id may be expected again. Nothing when it is not expected.
  void forget(int peer, std::uint32_t message);
  /// Receiver side: `message` from `peer`, expected, is part of a transfer the peer has begun (an earlier message of
  /// it landed): from now on the peer owes it, and silence for PICKLE_TIMEOUT until it lands fails the peer, as for a
  /// message some of whose chunks landed. (A message merely expected is not owed: its sender may not have started.)
  /// Nothing when it is not expected (it landed already, or was never expected) or the peer failed.
  void owe(int peer, std::uint32_t message);

  /// The owner learnt that `peer` failed (its control channel closed: the provider may report nothing, tcp does
  /// not). Fails the peer here too, unless the transport already did: its pending writes and expectations are
  /// dropped without callbacks, later write/expect calls throw PeerError, flush() no longer waits for it, and
  /// on_peer_failed is not called for it (the caller knows). Then waits, until `deadline`, for every rail to close
  /// its endpoints to the peer: after that no write of the peer's still reads a source, and nothing the peer sent
  /// lands in our memory, so the caller may report the failure and the application free those buffers. False when
  /// the deadline passed first (or when called from one of this transport's callbacks, which cannot wait for their
  /// own thread). Other peers' traffic goes on meanwhile: each peer has its own endpoints and queues.
  bool release(int peer, const Deadline& deadline);
  /// release() without the wait, for a peer that closed normally (it said goodbye after every rank's writes were
  /// done): nothing of its is in flight, and a closing job must not wait for each peer's queue to go quiet in turn.
  void release_closed_peer(int peer);

  /// Waits until every write accepted so far has completed (or was dropped with its failed peer); false when
  /// `deadline` passed first. The communicator calls it before telling its peers that it is closing.
  bool flush(const Deadline& deadline);

  /// bytes: payload written to peers (completed writes); operations: messages whose writes all completed;
  /// ipc_opens: memory registrations made; cache_hits: expose/write calls served by an existing registration.
  TransportStats stats() const;

  /// Stops the progress threads: no callback runs after this returns (the communicator's teardown, before it lets
  /// go of what the callbacks use). Pending work is dropped; the destructor closes the endpoints.
  void stop_callbacks();

  /// What each progress thread has done (tests and diagnostics): which way its endpoints carry writes, the chunks its
  /// writes completed (the set-up handshake's included) and the chunks of peers' messages that landed on it.
  struct RailLoad {
    enum class Direction { Both, Sending, Landing } direction = Direction::Both;
    std::uint64_t chunks_written = 0;
    std::uint64_t chunks_landed = 0;
  };
  std::vector<RailLoad> rail_loads() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pickle::transport::net
