#pragma once
// Completion writes of back-to-back ipc sends, off the copy's stream.
//
// An ipc send is a copy into the peer's memory and then a fenced write-value into the receiver's completion word. On
// the copy's stream that write holds the next copy back until it has run: into a second H200 a 1 MiB copy took 4.89
// us back to back and 7.62 with its write-value after it (docs/results/2026-11-29h-h200x2.md). An event record after
// each copy costs the copy stream nothing, and the write moved to a second stream (a lane) that waits for that event
// leaves the copies at their own rate (one H200 into pinned host memory: 20.56 against 20.55 us per 1 MiB copy, 22.50
// with the write on the copy's stream; docs/results/2026-12-01c-h200.md).
//
// The hand-off delays the write itself, and so the receiver, by an event wait. So a write goes to the lane only when
// its send directly follows another on the same stream whose own write has not run yet (a burst: the next copy is
// there to gain); a send after a wait on that stream (a ping-pong's answer waits for the question) writes on its own
// stream, as before. Later work on the stream is ordered after the copy either way; join() orders it after the lane's
// write too, where a Request::on_stream asks for the send's completion.
//
// Only for CUDA streams, with PICKLE_IPC_COMPLETION=lanes, the default since two H200s measured it: back-to-back
// 1 MiB sends 6.0-6.3 against 8.6-8.8 us per message, 1.89-2.00x NCCL's rate where the copy's stream took 1.34-1.38x;
// ping-pongs as before (docs/results/2026-12-01d-h200x2.md). `stream` keeps every write on the copy's stream. A host
// stream's write is an atomic store on the thread that just copied, and a host stream that drops its queue must take
// the send's write with it (Communicator::Impl::enqueue_ipc_copy). The class itself works on either kind, so the CPU
// tests run it.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <pickle/communicator.hpp>

#include "device/stream.hpp"

namespace pickle::transport::ipc {

class CompletionLanes {
 public:
  struct Lane;
  /// Where a send's completion write went: nowhere here (written on its own stream), or write `number` of `lane`.
  /// Weak: a Request kept long after does not keep the lane's stream and events; a lane that went had run its writes
  /// (lanes go only once idle).
  struct Written {
    std::weak_ptr<Lane> lane;
    std::uint64_t number = 0;
    bool on_lane() const noexcept { return number != 0; }
  };

  CompletionLanes(MemoryKind kind, int device);
  CompletionLanes(const CompletionLanes&) = delete;
  CompletionLanes& operator=(const CompletionLanes&) = delete;

  /// Enqueues the write of `value` into `word` (as streams address it) once everything enqueued on `stream` so far
  /// has completed: on `stream` itself, or on its lane when the last write enqueued here for `stream` came right
  /// before (no interrupt() since) and has not run yet. `host_word` is the same word as the host reads it. A lane
  /// that cannot take the write (its stream or events cannot be made, a record or wait is refused) leaves it on
  /// `stream`: the send's copy is queued already, and must not be reported as failed for want of a lane.
  Written write_after(device::Stream& stream, std::uint32_t* word, const std::uint32_t* host_word, std::uint32_t value);
  /// Says that `stream` got something other than a send since its last write here (a wait): its next write goes
  /// onto the stream itself.
  void interrupt(const device::Stream& stream);
  /// Makes `stream`, the stream whose write went to the lane, wait until the lane has run that write; nothing when
  /// it waits past it already (or the write went onto `stream` itself). True when it enqueued a wait.
  static bool join(device::Stream& stream, const Written& written);
  /// The lanes' streams: the teardown counts them among the streams that write the signal words.
  std::vector<std::weak_ptr<device::Stream>> streams();
  /// Writes that went to a lane so far.
  std::uint64_t lane_writes() const noexcept { return lane_writes_.load(std::memory_order_relaxed); }

  struct Lane {
    std::mutex mutex;
    // Whether an application's std::shared_ptr owns the served stream: its lane goes once that stream is gone and
    // the lane is idle, so that a stream per step does not grow the map. A transport's own stream keeps its lane.
    bool served_shared = false;
    std::weak_ptr<const device::Stream> served;
    std::shared_ptr<device::Stream> stream;          // made at the first write that goes here
    std::unique_ptr<device::Event> copied, written;  // the served stream's point; the lane's point for join()
    std::uint64_t writes = 0;                        // enqueued here
    std::uint64_t joined = 0;                        // writes the served stream waits past (join)
    const std::uint32_t* last_word = nullptr;        // the served stream's last write (host view), while nothing
    std::uint32_t last_value = 0;                    // else followed it there
  };

 private:
  std::shared_ptr<Lane> lane_of(const device::Stream& stream);
  /// Drops the lanes whose served stream is gone and which have nothing left to run (mutex_ held).
  void forget_idle_lanes_of_gone_streams_locked();

  MemoryKind kind_;
  int device_;
  std::mutex mutex_;
  // By device::Stream::serial(). Shared: a send keeps its lane (Written) for join(), even once the map let it go.
  std::map<std::uint64_t, std::shared_ptr<Lane>> lanes_;
  std::atomic<std::uint64_t> lane_writes_{0};
};

}  // namespace pickle::transport::ipc
