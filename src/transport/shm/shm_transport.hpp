#pragma once
// The shm transport: ranks of one host whose GPUs cannot reach each other's memory (no P2P: PCIe GPUs such as the
// RTX 4090, or peer access disabled), and host-memory ranks when forced. A message goes device-to-host into a
// staging ring in pinned shared host memory on the sender's stream and host-to-device out of it on the receiver's,
// chunk by chunk, so the two copies overlap (staging_ring.hpp). Copy engines only.
//
// The sender decides where a message sits in the ring (its first chunk) and tells the receiver on the control channel
// (the comm layer carries that message); the receiver queues its copies in ring order whatever order those messages
// arrive in. Stream operations are enqueued from worker threads (serial_worker.hpp), two per pair (one per direction),
// so that a pair whose stream is full behind a stopped or slow peer holds up no other pair's messages.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <pickle/communicator.hpp>

#include "core/clock.hpp"
#include "device/fd_channel.hpp"
#include "device/stream.hpp"
#include "core/serial_worker.hpp"
#include "transport/shm/staging_ring.hpp"

namespace pickle::transport::shm {

class ShmTransport {
 public:
  /// Collective between this rank and every peer with `uses[peer]` (each side of such a pair calls it at the same
  /// point of its set-up): creates the ring towards each such peer (PICKLE_SHM_CHUNK, PICKLE_SHM_SLOTS), sends it on
  /// the pair's channel and maps the peer's. `fail_peer` is called when queuing stream work for a peer fails (the
  /// pair's ring can then no longer stay in step).
  ShmTransport(int rank, MemoryKind kind, int device, const std::vector<bool>& uses,
               std::vector<std::optional<device::FdChannel>>& channels, const Deadline& deadline,
               std::function<void(int peer, const std::string& reason)> fail_peer);
  /// Waits (bounded) for queued work, then unmaps.
  ~ShmTransport();

  bool uses(int peer) const { return peer >= 0 && peer < static_cast<int>(peers_.size()) && peers_[peer] != nullptr; }

  /// A word as streams address it, and the value to write there.
  struct StreamWord {
    std::uint32_t* word;
    std::uint32_t value;
  };
  /// Sender: reserves the ring chunks of a message of `bytes` to `peer` (0 bytes: one chunk that carries no data,
  /// an ordering marker) and queues their copies from `src`, which must be ready: the caller reserves once it is.
  /// Then `source_read` (when set) is written, in stream order after the last chunk's copy: `src` may be reused.
  /// Returns where the message starts in the ring, which the receiver needs; nothing once the pair failed or was
  /// stopped: then nothing is queued, and the caller tells the peer nothing.
  std::optional<std::uint64_t> send(int peer, const void* src, std::size_t bytes,
                                    std::optional<StreamWord> source_read = std::nullopt);

  /// Receiver: the message of `bytes` at `first_chunk` of `peer`'s ring goes to `dst` (nullptr: consume and drop),
  /// then `*done_word = done_value` and `*sender_word = done_value` (each when set: this rank's completion word,
  /// then the sender's "sent" word) in stream order. Queued in ring order.
  void receive(int peer, std::uint64_t first_chunk, void* dst, std::size_t bytes, std::uint32_t* done_word,
               std::uint32_t done_value, std::uint32_t* sender_word = nullptr);

  /// The peer failed: releases every stream wait on its rings, drops its later work, and waits (until `deadline`)
  /// for the pair's queued copies to run through, so that once the caller reports the failure no copy still reads a
  /// send's source or writes a receive's buffer that the application may then free. Then the caller releases, from
  /// the host, the words its streams wait on (nothing queued will write older values over them). The first call
  /// does it; later ones wait until it is done.
  void release(int peer, const Deadline& deadline);
  /// Stops the pair without releasing its rings, for a peer that may be alive (a communicator closing while the
  /// peer is still busy): its later jobs queue nothing, a job waiting for room stops, and send() refuses it. What is
  /// queued stays, and goes on with the peer (the peer, once released rings let its streams through, could take
  /// the slots' stale bytes for a message). Tells the peer that this side gave the pair up (give_up) first.
  void stop(int peer);
  /// Marks the ring to `peer` as given up (StagingRing::mark_given_up), for a peer that may be alive: what it receives
  /// from here on may be stale. Before release() or stop(), and before the failure is reported. Not when the peer
  /// gave up first.
  void give_up(int peer);
  /// The peer's "gave up" word, as the host reads it (non-zero once the peer gave the pair up), while this transport
  /// exists.
  const std::uint32_t* peer_gave_up_word(int peer) const;
  /// Waits for all queued work, for at most `deadline`; false when it passed.
  bool synchronize_all(const Deadline& deadline);
  /// Lets every pair's queued work finish (5 s); a pair that does not (its peer alive but stopped or slow) is given
  /// up (give_up) and stops queuing, and its rings stay mapped until the process exits if its streams may still poll
  /// them. True when CUDA streams were left with work queued: they go on after this transport is gone, and may still
  /// write the signal words of the operations they carry (the caller keeps those too). The destructor calls it if
  /// nobody did.
  bool close();

  TransportStats stats() const;

 private:
  struct Pending {
    void* dst;
    std::size_t bytes;
    std::uint32_t* done_word;
    std::uint32_t done_value;
    std::uint32_t* sender_word;
  };
  struct Peer {
    std::unique_ptr<StagingRing> outgoing, incoming;
    std::unique_ptr<device::Stream> send_stream, recv_stream;
    std::uint64_t next_send_chunk = 0;            // guarded by mutex_
    std::uint64_t next_recv_chunk = 0;            // guarded by mutex_
    std::map<std::uint64_t, Pending> out_of_order;  // guarded by mutex_: announced ahead of an earlier message
    std::atomic<bool> failed{false};                 // set first: the workers skip the pair's later jobs
    std::atomic<int> running_jobs{0};                // the pair's worker jobs running now (post())
    std::mutex release_mutex;                        // held through release(): later callers wait for it
    bool released = false;                           // guarded by release_mutex
    // The threads that queue the pair's stream work, one per direction and pair: a pair whose stream is full (its
    // peer stopped, or is slow to copy out) holds up its own later messages only, not other pairs'. Declared last:
    // joined first, while the rings and streams their jobs use still exist.
    std::unique_ptr<SerialWorker> send_worker, recv_worker;
  };

  /// Chunks a worker keeps queued ahead of its stream (three stream operations each, five for a receive's last chunk:
  /// at most 640): well inside a stream's queue (about a thousand operations on CUDA, PICKLE_HOST_STREAM_DEPTH on the
  /// host), so that a worker never blocks in queuing, where nothing could stop it, but waits in await_room, which a
  /// failure or the teardown ends.
  static constexpr std::uint64_t kChunksAhead = 128;

  std::uint64_t chunks_of(const StagingRing& ring, std::size_t bytes) const;
  /// Before a worker queues `chunk` on the pair's sending (`sending` true: the ring's `full` flags tell how far it
  /// got) or receiving stream (`free` flags): returns at once while fewer than kChunksAhead are queued ahead of the
  /// stream; otherwise waits until the stream worked off half of them. False when the pair failed meanwhile, or the
  /// transport closes: the job queues nothing more.
  bool await_room(const Peer& peer, const StagingRing& ring, std::uint64_t chunk, bool sending) const;
  void enqueue_send(Peer& peer, std::uint64_t first, const std::byte* src, std::size_t bytes,
                    std::optional<StreamWord> source_read);
  void enqueue_receive(Peer& peer, std::uint64_t first, const Pending& message);
  /// Runs `job` on `worker` (one of the pair's) unless the pair failed first; a job that throws fails the pair.
  void post(SerialWorker& worker, int peer, std::function<void()> job);
  /// synchronize_all for one pair.
  bool synchronize_pair(Peer& peer, const Deadline& deadline);
  void give_up(Peer& peer);

  int rank_;
  MemoryKind kind_;
  int device_;
  std::function<void(int, const std::string&)> fail_peer_;
  std::vector<std::unique_ptr<Peer>> peers_;
  mutable std::mutex mutex_;
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> operations_{0};
  bool closed_ = false;
};

}  // namespace pickle::transport::shm
