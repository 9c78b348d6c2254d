#pragma once
// What one rank of `pickle bench p2p` holds for the whole run, whatever the backend: its buffers (send, receive,
// pattern source, flags), the peer's receive buffer and flags mapped into this process, the timing stream with its
// events, and the gate that holds every rank's timing stream until all iterations are enqueued.
//
// The gate (nvbandwidth's trick): each timed repeat starts with a wait_value on one shared flag word in rank 0's
// flags allocation (rank 1 waits on it through its mapping), then the start event, the iterations, the stop event.
// Once every rank has enqueued, rank 0 writes the flag from a second stream and all timing streams start together,
// so the cost of enqueueing is not timed and the ranks start within a flag write of each other.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/memory.hpp>

#include "device/export.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "p2p_options.hpp"

namespace pickle::bench {

class P2pContext {
 public:
  /// `active`: this rank is rank 0 or 1 (the others only keep in step).
  P2pContext(Store& store, MemoryKind kind, int device);
  ~P2pContext();
  P2pContext(const P2pContext&) = delete;
  P2pContext& operator=(const P2pContext&) = delete;

  Store& store() { return *store_; }
  int rank() const { return rank_; }
  /// The other active rank (1 for rank 0, 0 for rank 1; -1 for ranks that take no part).
  int peer() const { return active() ? 1 - rank_ : -1; }
  bool active() const { return rank_ < 2; }
  MemoryKind kind() const { return kind_; }
  int device() const { return device_; }

  /// Allocates the send, receive and source buffers for messages up to `capacity` bytes, halving it while the
  /// GPU is out of memory (down to `floor`). Returns the capacity obtained. Active ranks only.
  std::size_t allocate(std::size_t capacity, std::size_t floor);
  std::size_t capacity() const { return capacity_; }

  /// Maps the peer's receive buffer (which must hold `needed` bytes) and flags (fd passing over an abstract Unix
  /// socket named after `nonce`). Collective between ranks 0 and 1.
  void exchange(const std::string& nonce, std::size_t needed);
  /// Fills the source buffer with this rank's stream and zeroes the flags.
  void fill_source();
  /// Unmaps the peer's memory (every rank must do this before any rank frees its buffers).
  void unmap_peer();

  std::uint8_t* send_buffer() const { return static_cast<std::uint8_t*>(send_->data()); }
  std::uint8_t* recv_buffer() const { return static_cast<std::uint8_t*>(recv_->data()); }
  std::uint8_t* peer_recv_buffer() const { return peer_recv_; }

  device::Stream& stream() { return *stream_; }
  /// The timing stream as shared ownership (pickle::Stream wraps it for the Communicator).
  const std::shared_ptr<device::Stream>& stream_handle() { return stream_; }
  device::Event& start_event() { return *start_; }
  device::Event& stop_event() { return *stop_; }

  /// Sequence number of the next gated repeat; the same on every rank.
  std::uint32_t next_gate() { return ++gate_sequence_; }
  /// Enqueues on the timing stream: wait until gate `sequence` is open: rank 0's, or this rank's own when the
  /// peer's flags are not mapped (ranks on two hosts).
  void wait_gate(std::uint32_t sequence);
  /// Opens gate `sequence` (from the gate stream, so that the timing stream's state does not matter) where this
  /// rank owns the gate it waits on (rank 0; every rank on two hosts); nothing otherwise. Every rank calls it.
  void open_gate(std::uint32_t sequence);
  /// False once exchange() mapped the peer's buffers; true for rank 0, and for a rank whose peer is on another host.
  bool opens_own_gate() const { return rank_ == 0 || peer_flags_ == nullptr; }

  /// The flag word that the peer writes to signal this rank, and this rank's handle on the peer's word.
  std::uint32_t* my_ping() const;
  std::uint32_t* peer_ping() const;
  /// Values written to the peer's ping word so far / expected in this rank's own: both sides count alike.
  std::uint32_t next_ping_out() { return ++ping_out_; }
  std::uint32_t next_ping_in() { return ++ping_in_; }

  /// Enqueues: the send buffer becomes the window of this rank's source stream at `shift` (pattern.hpp); with the
  /// test hook PICKLE_BENCH_CORRUPT, one byte of it is then flipped.
  void load_send_window(std::size_t bytes, std::uint64_t shift);
  /// Enqueues and waits: every byte of the receive buffer's first `bytes` becomes kPoisonByte.
  void poison_recv(std::size_t bytes);
  /// Copies the receive buffer back and counts the bytes that differ from `sender`'s window at `shift`.
  std::uint64_t count_wrong_received(std::size_t bytes, int sender, std::uint64_t shift);

 private:
  static constexpr std::size_t kFlagsBytes = 4096;
  static constexpr std::size_t kGateWord = 0;   // 32-bit word index; words 64 bytes apart
  static constexpr std::size_t kPingWord = 16;
  /// Host staging for pattern generation and read-back: bounded, whatever the message size.
  static constexpr std::size_t kStagingBytes = std::size_t{64} << 20;

  std::uint32_t* flag_word(std::uint8_t* base, std::size_t word) const {
    return reinterpret_cast<std::uint32_t*>(base) + word;
  }
  std::vector<std::uint8_t>& staging(std::size_t bytes);

  Store* store_;
  int rank_;
  MemoryKind kind_;
  int device_;
  bool corrupt_ = false;
  std::size_t capacity_ = 0;
  std::unique_ptr<device::Allocation> send_, recv_, source_, flags_;
  std::unique_ptr<device::ImportedMemory> peer_recv_mapping_, peer_flags_mapping_;
  std::uint8_t* peer_recv_ = nullptr;
  std::uint8_t* peer_flags_ = nullptr;
  std::shared_ptr<device::Stream> stream_, gate_stream_;
  std::unique_ptr<device::Event> start_, stop_;
  std::uint32_t gate_sequence_ = 0;
  std::uint32_t ping_out_ = 0, ping_in_ = 0;
  std::vector<std::uint8_t> staging_;
  std::vector<std::uint8_t> poison_;
  std::uint8_t corrupt_byte_ = 0;  // the flipped byte's value; a member because a stream copies it later
};

}  // namespace pickle::bench
