#pragma once
// The sending side of staged net sends (GPU memory over a transport that registers host memory only): each send goes
// through a ring of a few pinned pieces (send_ring.hpp). A thread of its own copies a piece out of the source when a
// slot of the send's ring is free (the copy engine, on the communicator's copy stream), sees the copy complete (an
// event per piece, in stream order), and hands the piece to the transport; the piece's writes completing frees the
// slot for the next piece. The copies are queued by this thread, never by a host callback (those must not call
// CUDA) nor by a transport thread (a CUDA call that blocks would stall the lane).
//
// The send reads its source after the application's stream has gone past it (as a send matched late, or an shm
// send, does): its Request says when the source may be reused. So that a failed send's source may be freed once the
// failure is reported, a send fails only once none of its copies is queued any more (StagedSendJob::on_failed), and
// release() returns once none of a failed peer's are.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pickle/memory.hpp>

#include "comm/send_ring.hpp"
#include "core/clock.hpp"
#include "device/stream.hpp"

namespace pickle::comm {

/// Operations a staged send puts on the stream it is issued from: the host callback that starts it (a write and a
/// wait). Its pieces' copies go on the sender's stream.
inline constexpr int kStagedSendStreamOps = 2;

/// One staged send, as the communicator hands it over.
struct StagedSendJob {
  int peer = -1;
  const std::byte* src = nullptr;
  std::size_t bytes = 0;  // > 0
  SendRing ring;
  /// ring.slots pinned buffers of at least min(ring.piece_bytes, bytes) bytes each.
  std::vector<std::shared_ptr<std::byte>> slots;
  /// Hands bytes [offset, offset + length) of the message, copied to `from`, to the transport; `written` runs (on a
  /// transport thread) once its writes completed. Throws when the transport refuses it (nothing of it then leaves).
  std::function<void(const std::byte* from, std::size_t offset, std::size_t length, std::function<void()> written)>
      write;
  /// Every piece's writes completed (on a transport thread).
  std::function<void()> on_sent;
  /// A piece could not be copied or written: runs once, on the sender's thread, when none of the send's copies is
  /// queued any more. `partly_written`: an earlier piece was handed to the transport (its bytes may still land).
  std::function<void(std::exception_ptr error, bool partly_written)> on_failed;
};

class StagedSender {
 public:
  /// `copies`: the stream the pieces are copied on (made by the caller on the application's thread: a CUDA stream
  /// made on a thread of pickle's may wait for the application's synchronous copies); events of `kind` on `device`
  /// mark the pieces' copies.
  StagedSender(device::Stream& copies, MemoryKind kind, int device);
  /// Stops the thread (if stop() has not), then waits (bounded) for the copies still queued, whose buffers it holds.
  ~StagedSender();
  StagedSender(const StagedSender&) = delete;
  StagedSender& operator=(const StagedSender&) = delete;

  /// Starts a send: its first pieces are copied as soon as the thread gets to them. Calls no CUDA, so a host
  /// callback of the application's stream may call it (where the send is in the stream's order).
  void start(std::shared_ptr<StagedSendJob> job);
  /// `peer` failed and its transport let go of it: none of its sends' pieces is copied or handed over any more, and
  /// they are dropped without callbacks. Returns once none of their copies is queued (they read the application's
  /// source), false if `deadline` passed first. Any thread, the sender's own included.
  bool release(int peer, const Deadline& deadline);
  /// Waits until every started send was sent, failed or released; false if `deadline` passed first.
  bool drain(const Deadline& deadline);
  /// Stops the thread: nothing more is copied or handed over. Before the transport goes (the thread writes through
  /// it); the sender itself must outlive the transport, whose completions call back into it.
  void stop();

 private:
  struct Send;
  struct QueuedCopy;

  void run();
  /// Copies the send's next piece into `slot` (the thread only); nothing when it has none or stopped.
  void issue(const std::shared_ptr<Send>& send, std::size_t slot);
  /// Hands a copied piece to the transport (the thread only), or fails its send if the copy failed.
  void hand_over(QueuedCopy& copy, std::exception_ptr copy_failed);
  /// The piece in `slot` was written: the next piece may take the slot (a transport thread).
  void written(const std::shared_ptr<Send>& send, std::size_t slot);
  /// Records the send's failure (mutex_ held); returns the on_failed call to make, outside the lock, if due.
  std::function<void()> fail_locked(Send& send, std::exception_ptr error);
  /// The on_failed call of a failed send none of whose copies is queued, once (mutex_ held).
  std::function<void()> report_if_due_locked(Send& send);
  void finish_locked(const std::shared_ptr<Send>& send);

  device::Stream& copies_;
  MemoryKind kind_;
  int device_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<std::shared_ptr<Send>, std::size_t>> free_slots_;  // to fill, in the order they came
  std::deque<QueuedCopy> queued_;                     // in the copy stream's order
  std::vector<std::unique_ptr<device::Event>> spare_events_;
  std::vector<std::shared_ptr<Send>> active_;  // started, not yet sent, failed or released
  int issuing_peer_ = -1;  // the peer whose piece the thread is queuing a copy for (outside the lock), else -1
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pickle::comm
