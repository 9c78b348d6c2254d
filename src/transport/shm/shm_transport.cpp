#include "transport/shm/shm_transport.hpp"

#include <algorithm>
#include <string>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/descriptor.hpp"
#include "device/host/backoff.hpp"

namespace pickle::transport::shm {

ShmTransport::ShmTransport(int rank, MemoryKind kind, int device, const std::vector<bool>& uses,
                           std::vector<std::optional<device::FdChannel>>& channels, const Deadline& deadline,
                           std::function<void(int peer, const std::string& reason)> fail_peer)
    : rank_(rank), kind_(kind), device_(std::max(0, device)), fail_peer_(std::move(fail_peer)) {
  const long long chunk = env::get_int("PICKLE_SHM_CHUNK");
  const long long slots = env::get_int("PICKLE_SHM_SLOTS");
  if (chunk < 4096 || slots < 2 || slots > StagingRing::kMaxSlots) {
    throw InvalidArgument(cat("rank ", rank, ": PICKLE_SHM_CHUNK=", chunk, " PICKLE_SHM_SLOTS=", slots,
                              ": chunks of at least 4096 bytes and 2 to ", StagingRing::kMaxSlots, " slots"));
  }
  peers_.resize(uses.size());
  // Every ring out first, then every ring in: each pair's channel is a FIFO, so the order cannot deadlock.
  for (std::size_t peer = 0; peer < uses.size(); ++peer) {
    if (!uses[peer] || static_cast<int>(peer) == rank) continue;
    auto state = std::make_unique<Peer>();
    state->outgoing = StagingRing::create(kind, device_, static_cast<std::size_t>(chunk), static_cast<int>(slots));
    state->send_stream = device::make_stream(kind, device_);
    state->recv_stream = device::make_stream(kind, device_);
    state->send_worker = std::make_unique<SerialWorker>(cat("shm send to peer ", peer));
    state->recv_worker = std::make_unique<SerialWorker>(cat("shm receive from peer ", peer));
    auto exported = state->outgoing->export_memory();
    channels[peer]->send(device::serialize(exported.descriptor), exported.fd.get(), deadline);
    peers_[peer] = std::move(state);
  }
  for (std::size_t peer = 0; peer < uses.size(); ++peer) {
    if (!peers_[peer]) continue;
    auto message = channels[peer]->recv(deadline);
    peers_[peer]->incoming =
        StagingRing::import(device::parse_descriptor(message.bytes), std::move(message.fd), kind, device_);
  }
  PICKLE_LOG(Debug, "shm", "rank " << rank << ": shm rings of " << slots << " x " << human_bytes(chunk));
}

ShmTransport::~ShmTransport() {
  if (!closed_) close();
}

bool ShmTransport::close() {
  closed_ = true;
  // Every pair gets the whole grace, one stuck pair does not cut a healthy one's last copies short.
  const Deadline deadline = Deadline::after_seconds(5);
  std::vector<Peer*> stuck;
  for (auto& peer : peers_) {
    if (peer && !synchronize_pair(*peer, deadline)) stuck.push_back(peer.get());
  }
  if (stuck.empty()) return false;
  // A pair whose peer is alive but stopped (or slow) at our close: its workers wait for room on its streams, and its
  // streams for the peer. Its rings are not released (the peer, once it goes on, would copy out of slots that our
  // sending stream overwrote unchecked, and might complete a receive with them before it hears that we closed): its
  // workers stop queuing, and rings that a stream may still poll stay mapped until the process exits.
  PICKLE_LOG(Warn, "shm", "rank " << rank_ << ": shm transport closed with copies still queued for " << stuck.size()
                          << " peer(s); pairs whose streams had not run them keep their staging rings until the "
                          "process exits");
  bool left_running = false;
  for (Peer* peer : stuck) {
    // Where the sending side is stuck, the peer's receive, once it goes on, may copy out what this side's orphaned
    // stream reads after the application reused its send buffers: it must not report it. (Only the receiving side
    // stuck: nothing of this side's reaches the peer any more, and the mark would fail what it received intact.)
    if (!peer->send_worker->idle() || !peer->send_stream->idle_now()) give_up(*peer);
    peer->failed = true;
    {
      std::lock_guard lock(peer->release_mutex);
      peer->released = true;  // a later release() would find the streams gone
    }
    peer->send_worker.reset();
    peer->recv_worker.reset();
    const bool idle = peer->send_stream->idle_now() && peer->recv_stream->idle_now();
    peer->send_stream.reset();  // a host stream lets its waits go after a grace and stops; a CUDA one goes on
    peer->recv_stream.reset();
    if (!idle) {
      left_running = true;
      StagingRing::keep_until_exit(std::move(peer->outgoing));
      StagingRing::keep_until_exit(std::move(peer->incoming));
    }
  }
  return left_running && kind_ == MemoryKind::Cuda;
}

std::uint64_t ShmTransport::chunks_of(const StagingRing& ring, std::size_t bytes) const {
  return bytes == 0 ? 1 : (bytes + ring.chunk_bytes() - 1) / ring.chunk_bytes();
}

bool ShmTransport::await_room(const Peer& peer, const StagingRing& ring, std::uint64_t chunk, bool sending) const {
  const auto slots = static_cast<std::uint64_t>(ring.slots());
  // Whether the stream is done with chunk `done`: it writes the chunk's slot flag with the chunk's use (a later use
  // of the slot reads as reached too).
  auto stream_did = [&](std::uint64_t done) {
    const int slot = static_cast<int>(done % slots);
    const auto use = static_cast<std::uint32_t>(done / slots + 1);
    return sending ? ring.full_reached(slot, use) : ring.free_reached(slot, use);
  };
  // The failure first: a released ring reads as done everywhere, and a peer still alive may write older values back.
  if (peer.failed.load()) return false;
  if (chunk < kChunksAhead || stream_did(chunk - kChunksAhead)) return true;
  for (device::host::Backoff backoff; !stream_did(chunk - kChunksAhead / 2); backoff.pause()) {
    if (peer.failed.load()) return false;
  }
  return true;
}

void ShmTransport::post(SerialWorker& worker, int peer, std::function<void()> job) {
  worker.post([this, &state = *peers_[peer], peer, job = std::move(job)] {
    std::string failure;
    {
      // Counted as running before `failed` is read, and release() sets `failed` before it reads the count: either
      // release() waits for this job, or this job sees the failure and queues nothing (both atomics seq_cst).
      state.running_jobs.fetch_add(1);
      struct Done {
        std::atomic<int>& count;
        ~Done() { count.fetch_sub(1); }
      } done{state.running_jobs};
      if (state.failed.load()) return;
      try {
        job();
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    // After the job stopped counting as running: fail_peer waits for the pair's running jobs.
    if (!failure.empty()) {
      fail_peer_(peer, cat("rank ", rank_, " -> peer ", peer, ": shm transport: queuing copies failed: ", failure));
    }
  });
}

std::optional<std::uint64_t> ShmTransport::send(int peer, const void* src, std::size_t bytes,
                                                std::optional<StreamWord> source_read) {
  if (!uses(peer)) throw Error(ErrorCode::Internal, cat("rank ", rank_, ": peer ", peer, " is not an shm peer"));
  Peer& state = *peers_[peer];
  std::lock_guard lock(mutex_);
  // A pair that fails from here on skips the job (post()): the peer, told where the message starts, waits for
  // chunks that never come rather than taking anything for them (a failed pair's rings are released only when the
  // peer is dead).
  if (state.failed.load()) return std::nullopt;
  const std::uint64_t first = state.next_send_chunk;
  state.next_send_chunk += chunks_of(*state.outgoing, bytes);
  // Posted under the lock: the worker enqueues messages in the order their chunks were reserved, so every stream's
  // waits on the ring point backwards only.
  post(*state.send_worker, peer, [this, &state, first, src, bytes, source_read] {
    enqueue_send(state, first, static_cast<const std::byte*>(src), bytes, source_read);
  });
  bytes_ += bytes;
  ++operations_;
  return first;
}

void ShmTransport::enqueue_send(Peer& peer, std::uint64_t first, const std::byte* src, std::size_t bytes,
                                std::optional<StreamWord> source_read) {
  const StagingRing& ring = *peer.outgoing;
  device::Stream& stream = *peer.send_stream;
  const std::uint64_t slots = static_cast<std::uint64_t>(ring.slots());
  const std::uint64_t chunks = chunks_of(ring, bytes);
  for (std::uint64_t i = 0; i < chunks; ++i) {
    const std::uint64_t chunk = first + i;
    if (!await_room(peer, ring, chunk, /*sending=*/true)) return;  // the pair failed: nothing more is sent
    const int slot = static_cast<int>(chunk % slots);
    const auto use = static_cast<std::uint32_t>(chunk / slots + 1);
    const std::size_t offset = i * ring.chunk_bytes();
    const std::size_t length = std::min(ring.chunk_bytes(), bytes - std::min(bytes, offset));
    stream.wait_value(ring.free_for_streams(slot), use - 1);  // the receiver copied the slot's previous chunk out
    if (length != 0) stream.copy(ring.slot_for_streams(slot), src + offset, length);
    stream.write_value(ring.full_for_streams(slot), use);
  }
  if (source_read) stream.write_value(source_read->word, source_read->value);
}

void ShmTransport::receive(int peer, std::uint64_t first_chunk, void* dst, std::size_t bytes, std::uint32_t* done_word,
                           std::uint32_t done_value, std::uint32_t* sender_word) {
  if (!uses(peer)) throw Error(ErrorCode::Internal, cat("rank ", rank_, ": peer ", peer, " is not an shm peer"));
  Peer& state = *peers_[peer];
  std::lock_guard lock(mutex_);
  state.out_of_order.emplace(first_chunk, Pending{dst, bytes, done_word, done_value, sender_word});
  // Queue every message whose turn has come, in ring order.
  for (auto it = state.out_of_order.begin(); it != state.out_of_order.end() && it->first == state.next_recv_chunk;
       it = state.out_of_order.erase(it)) {
    state.next_recv_chunk += chunks_of(*state.incoming, it->second.bytes);
    post(*state.recv_worker, peer, [this, &state, first = it->first, message = it->second] {
      enqueue_receive(state, first, message);
    });
  }
}

void ShmTransport::enqueue_receive(Peer& peer, std::uint64_t first, const Pending& message) {
  const StagingRing& ring = *peer.incoming;
  device::Stream& stream = *peer.recv_stream;
  const std::uint64_t slots = static_cast<std::uint64_t>(ring.slots());
  const std::uint64_t chunks = chunks_of(ring, message.bytes);
  auto* dst = static_cast<std::byte*>(message.dst);
  for (std::uint64_t i = 0; i < chunks; ++i) {
    const std::uint64_t chunk = first + i;
    if (!await_room(peer, ring, chunk, /*sending=*/false)) return;  // the pair failed: nothing more is received
    const int slot = static_cast<int>(chunk % slots);
    const auto use = static_cast<std::uint32_t>(chunk / slots + 1);
    const std::size_t offset = i * ring.chunk_bytes();
    const std::size_t length = std::min(ring.chunk_bytes(), message.bytes - std::min(message.bytes, offset));
    stream.wait_value(ring.full_for_streams(slot), use);  // the sender's chunk is in the slot
    if (dst != nullptr && length != 0) stream.copy(dst + offset, ring.slot_for_streams(slot), length);
    stream.write_value(ring.free_for_streams(slot), use);
  }
  // write_value is a release: the data copied above is visible to whoever sees the word.
  if (message.done_word != nullptr) stream.write_value(message.done_word, message.done_value);
  if (message.sender_word != nullptr) stream.write_value(message.sender_word, message.done_value);
}

void ShmTransport::stop(int peer) {
  if (!uses(peer)) return;
  give_up(peer);
  peers_[peer]->failed = true;
}

void ShmTransport::give_up(int peer) {
  if (uses(peer)) give_up(*peers_[peer]);
}

void ShmTransport::give_up(Peer& peer) {
  // A peer that gave up first takes nothing of this side's as delivered any more, and its own failure settled what
  // it had received: a mark back would fail messages it received intact.
  if (peer.outgoing == nullptr || device::host::load_acquire(peer.incoming->given_up_word()) != 0) return;
  peer.outgoing->mark_given_up();
}

const std::uint32_t* ShmTransport::peer_gave_up_word(int peer) const {
  if (!uses(peer)) throw Error(ErrorCode::Internal, cat("rank ", rank_, ": peer ", peer, " is not an shm peer"));
  return peers_[peer]->incoming->given_up_word();
}

void ShmTransport::release(int peer, const Deadline& deadline) {
  if (!uses(peer)) return;
  Peer& state = *peers_[peer];
  state.failed = true;  // the pair's jobs that have not started yet queue nothing (post())
  std::lock_guard lock(state.release_mutex);
  if (state.released) return;
  state.released = true;
  // Raised here and again while the pair's streams run through: they write older uses back over raised flags (the
  // peer's streams, if it goes on, over the flags this side's streams wait on), and a stream must not stop on one of
  // those. By value: flags that stand at the target do not move (StagingRing::release).
  auto raise_flags = [&state] {
    state.outgoing->release();
    state.incoming->release();
  };
  raise_flags();
  // The pair's queued copies now run through the released flags (into and out of the ring, from sources and into
  // buffers the application may free once it hears of the failure): let them finish first. Only a job of this pair
  // that is running now can still queue more, and it finishes soon: its stream drains through the released flags.
  // Jobs of other pairs are not waited for (they may wait on healthy peers whose progress threads are themselves
  // here), nor is a worker that called this (its job no longer counts as running).
  bool drained = true;
  for (device::host::Backoff backoff; state.running_jobs.load() != 0; backoff.pause()) {
    if (deadline.expired()) {
      drained = false;
      break;
    }
    raise_flags();
  }
  try {
    // query(), not idle_now(): a broken stream, which never gets idle, throws rather than holding this to the deadline.
    for (device::host::Backoff backoff; !(state.send_stream->query() && state.recv_stream->query()) &&
                                        !deadline.expired();
         backoff.pause()) {
      raise_flags();
    }
  } catch (const Error& e) {
    drained = false;
    PICKLE_LOG(Warn, "shm", "rank " << rank_ << " -> peer " << peer << ": after the failure: " << e.what());
  }
  for (device::Stream* stream : {state.send_stream.get(), state.recv_stream.get()}) {
    try {
      stream->synchronize_until(deadline);
    } catch (const Error& e) {
      drained = false;
      PICKLE_LOG(Warn, "shm", "rank " << rank_ << " -> peer " << peer << ": after the failure: " << e.what());
    }
  }
  // This side's streams write nothing more now (unless stuck): a last raise leaves every flag they wrote back at the
  // target. Their last writes land after the loop's last raise, while it pauses, and a peer that never releases the
  // pair itself (it waits on a stream, or gave up first and stopped) would otherwise wait on one of them for ever.
  raise_flags();
  if (!drained) {
    // Something is badly stuck (a hung device): the failure is reported anyway, rather than never.
    PICKLE_LOG(Warn, "shm", "rank " << rank_ << " -> peer " << peer
                                    << ": copies of the failed pair still queued at the deadline; they may still "
                                       "touch the buffers of its operations, and write older values into its words");
  }
}

bool ShmTransport::synchronize_all(const Deadline& deadline) {
  bool all = true;
  for (auto& peer : peers_) {
    if (peer) all = synchronize_pair(*peer, deadline) && all;
  }
  return all;
}

bool ShmTransport::synchronize_pair(Peer& peer, const Deadline& deadline) {
  if (!peer.send_worker->drain(deadline) || !peer.recv_worker->drain(deadline)) return false;
  for (auto* stream : {peer.send_stream.get(), peer.recv_stream.get()}) {
    try {
      stream->synchronize_until(deadline);
    } catch (const TimeoutError&) {
      return false;
    } catch (const Error& e) {  // a broken stream: it runs nothing more, but what it holds is not known to be done
      PICKLE_LOG(Warn, "shm", "rank " << rank_ << ": shm stream: " << e.what());
      return false;
    }
  }
  return true;
}

TransportStats ShmTransport::stats() const {
  TransportStats stats;
  stats.bytes = bytes_.load();
  stats.operations = operations_.load();
  return stats;
}

}  // namespace pickle::transport::shm
