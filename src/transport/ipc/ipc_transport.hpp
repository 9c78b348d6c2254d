#pragma once
// The ipc transport: peers on this host whose GPUs reach each other (or host-memory ranks). Data moves by the copy
// engine straight into the peer's mapped allocation, and the completion is a stream write-value into the peer's
// signal word. No kernel runs in the data path. Sends that do not join the caller's stream take turns over
// PICKLE_IPC_STREAMS copy streams per peer, whole message by whole message (splitting one copy over several streams
// measured slower between one pair of H200s). Taking turns lets one message's fenced flag write overlap the next
// one's copy, which pays for raw copies but not, after the event hand-off, for pickle's sends: the default is one
// stream (docs/results/2026-11-24-h200x1.md and 2026-11-24-h100x1.md).

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <pickle/communicator.hpp>

#include "core/format.hpp"
#include "device/stream.hpp"
#include "transport/ipc/completion_lanes.hpp"
#include "transport/ipc/mapping_cache.hpp"

namespace pickle::transport::ipc {

class IpcTransport {
 public:
  IpcTransport(int rank, int world, MemoryKind kind, int device);

  /// A copy stream for a transfer to `peer` (the next in turn).
  device::Stream& stream(int peer);
  /// True with one copy stream per peer (PICKLE_IPC_STREAMS=1): a send matched at call time then runs on the
  /// caller's stream; with several, every send takes its turn on them.
  bool joins_caller_stream() const noexcept { return streams_per_peer_ == 1; }
  MappingCache& cache() { return cache_; }

  /// Where back-to-back sends' completion writes go off their copy's stream (completion_lanes.hpp); null where they
  /// stay on it (PICKLE_IPC_COMPLETION=stream; host memory).
  CompletionLanes* completion_lanes() noexcept { return lanes_.get(); }
  /// Says that a wait went onto `stream` (CompletionLanes::interrupt; nothing without lanes).
  void note_wait_on(const device::Stream& stream) {
    if (lanes_) lanes_->interrupt(stream);
  }

  /// The address, in this process, of [offset, offset + bytes) of `peer`'s allocation `id`. An allocation that was
  /// never announced is a ProtocolError, a range past its end an InvalidArgument; both name `ctx`.
  void* remote_address(int peer, std::uint64_t id, std::uint64_t offset, std::size_t bytes, const OpContext& ctx);

  /// Enqueues the copy of `bytes` from `src` to `dst` (an address from remote_address) on `stream`, and counts it.
  void copy(device::Stream& stream, void* dst, const void* src, std::size_t bytes);
  /// The copies (addresses from remote_address) as one batch on `stream` (device::Stream::copies), each counted.
  void copies(device::Stream& stream, std::span<const device::Stream::Copy> batch);

  /// After `stream` refused a send's work: if it is one of `peer`'s copy streams (it gave up a wait for a caller's
  /// point that was dropped after the wait was queued), reports its error, so that it takes the next send's work
  /// again. An application's stream is left as it is: its error is the application's to hear.
  void clear_copy_stream_error(int peer, device::Stream& stream);
  /// Called when `stream` dropped a send's work unrun (from that stream's own thread, so nothing here waits for it).
  /// If it is one of `peer`'s copy streams, it now refuses work until its error is reported: clear_dropped_work
  /// reports it before the next send queues there, so that the next send is not refused for a drop not its own.
  void note_dropped_work(int peer, const device::Stream* stream);
  void clear_dropped_work(int peer, device::Stream& stream);

  /// Waits for every peer stream (before mappings go away). Not the completion lanes: a lane waits for its
  /// application stream, which may be held by a wait that only the teardown's last step releases; they write only
  /// signal words, which that step keeps while a lane has not passed its end (Communicator::Impl::retire_signal_area).
  void synchronize_all();

  TransportStats stats() const;

 private:
  /// Which of `peer`'s copy streams `stream` is (only its address is compared); none for an application's stream.
  std::optional<std::size_t> own_stream_index(int peer, const device::Stream* stream) const;

  MappingCache cache_;
  long long streams_per_peer_ = 1;
  std::vector<std::vector<std::unique_ptr<device::Stream>>> streams_;  // per peer
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>>> next_;       // per peer: whose turn
  // Per peer, per copy stream: it dropped work, and has an error to report before it takes more (note_dropped_work).
  std::vector<std::vector<std::unique_ptr<std::atomic<bool>>>> dropped_;
  std::unique_ptr<CompletionLanes> lanes_;
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> operations_{0};
};

}  // namespace pickle::transport::ipc
