#include "comm/staged_sender.hpp"

#include <algorithm>
#include <chrono>

#include "core/env.hpp"
#include "core/log.hpp"
#include "device/host/backoff.hpp"

namespace pickle::comm {
namespace {

// How long the thread sleeps between looks at a piece's copy that is not done yet: a 2 MiB copy takes ~40 us, and a
// ring keeps several pieces ahead of the wire, so a look every few tens of microseconds costs nothing in bandwidth
// and keeps the thread off a core.
constexpr auto kCopyPollInterval = std::chrono::microseconds(20);
// Events made with the sender: enough for the rings of a few sends at once (a ring has at most 16 slots).
constexpr int kPreparedEvents = 32;

}  // namespace

struct StagedSender::Send {
  std::shared_ptr<StagedSendJob> job;
  std::size_t next_piece = 0;      // the next piece to copy
  std::size_t pieces_written = 0;  // pieces whose writes completed
  int copies_queued = 0;           // pieces whose copy is queued and not yet seen done
  bool handed_any = false;         // a piece went to the transport
  bool failed = false;
  bool reported = false;  // on_failed was called
  bool released = false;  // its peer failed: dropped without callbacks
  std::exception_ptr error;
};

struct StagedSender::QueuedCopy {
  std::shared_ptr<Send> send;
  std::size_t piece = 0;
  std::size_t slot = 0;
  std::unique_ptr<device::Event> done;  // recorded after the copy
};

StagedSender::StagedSender(device::Stream& copies, MemoryKind kind, int device)
    : copies_(copies), kind_(kind), device_(device) {
  // Events for the first pieces now, on the caller's thread: the thread makes more only when more copies than
  // these are queued at once (CUDA calls of a thread of pickle's are kept to the copies themselves where it can).
  for (int i = 0; i < kPreparedEvents; ++i) spare_events_.push_back(device::make_ordering_event(kind_, device_));
  thread_ = std::thread([this] { run(); });
}

StagedSender::~StagedSender() {
  stop();
  // The queued copies write into the sends' pinned buffers, which go back to the pool with the sends.
  try {
    copies_.synchronize_until(Deadline::after_seconds(env::timeout_seconds()));
  } catch (const std::exception& e) {
    PICKLE_LOG(Warn, "comm", "staged sends: copies still queued at teardown: " << e.what());
  }
}

void StagedSender::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StagedSender::start(std::shared_ptr<StagedSendJob> job) {
  auto send = std::make_shared<Send>();
  send->job = std::move(job);
  {
    std::lock_guard lock(mutex_);
    active_.push_back(send);
    for (std::size_t slot = 0; slot < send->job->ring.slots; ++slot) free_slots_.emplace_back(send, slot);
  }
  wake_.notify_one();
}

void StagedSender::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (free_slots_.empty() && queued_.empty()) {
      wake_.wait(lock);
      continue;
    }
    while (!free_slots_.empty() && !stop_) {
      auto [send, slot] = std::move(free_slots_.front());
      free_slots_.pop_front();
      lock.unlock();
      issue(send, slot);
      lock.lock();
    }
    // The copies complete in the stream's order: hand over pieces from the front while their copies are done. Only
    // this thread adds to or takes from queued_, so its front stays put while the lock is released.
    bool handed = false;
    while (!queued_.empty() && !stop_) {
      QueuedCopy& front = queued_.front();
      lock.unlock();
      bool done = true;
      std::exception_ptr broken;
      try {
        done = front.done->query();
      } catch (...) {
        broken = std::current_exception();  // the stream failed: so did the copy
      }
      lock.lock();
      if (!done) break;
      QueuedCopy copy = std::move(queued_.front());
      queued_.pop_front();
      lock.unlock();
      hand_over(copy, broken);
      lock.lock();
      handed = true;
    }
    if (!handed && free_slots_.empty() && !queued_.empty()) wake_.wait_for(lock, kCopyPollInterval);
  }
}

void StagedSender::issue(const std::shared_ptr<Send>& send, std::size_t slot) {
  std::size_t piece = 0;
  std::unique_ptr<device::Event> event;
  {
    std::lock_guard lock(mutex_);
    if (send->failed || send->released || send->next_piece >= send->job->ring.pieces) return;
    piece = send->next_piece++;
    ++send->copies_queued;
    issuing_peer_ = send->job->peer;  // release() waits until this copy is queued (or not)
    if (!spare_events_.empty()) {
      event = std::move(spare_events_.back());
      spare_events_.pop_back();
    }
  }
  const StagedSendJob& job = *send->job;
  const std::size_t offset = piece * job.ring.piece_bytes;
  const std::size_t length = std::min(job.ring.piece_bytes, job.bytes - offset);
  std::function<void()> report;
  try {
    if (!event) event = device::make_ordering_event(kind_, device_);
    copies_.copy(job.slots[slot].get(), job.src + offset, length);
    copies_.record(*event);
    std::lock_guard lock(mutex_);
    queued_.push_back(QueuedCopy{send, piece, slot, std::move(event)});
    issuing_peer_ = -1;
  } catch (...) {
    // Nothing of this piece is queued (or the stream is broken, and whatever it held will not run properly either).
    std::lock_guard lock(mutex_);
    --send->copies_queued;
    issuing_peer_ = -1;
    report = fail_locked(*send, std::current_exception());
  }
  if (report) report();
}

void StagedSender::hand_over(QueuedCopy& copy, std::exception_ptr copy_failed) {
  Send& send = *copy.send;
  std::function<void()> report;
  bool hand = false;
  {
    std::lock_guard lock(mutex_);
    --send.copies_queued;
    if (!copy_failed) spare_events_.push_back(std::move(copy.done));
    if (copy_failed && !send.released) {
      report = fail_locked(send, copy_failed);
    } else {
      hand = !send.failed && !send.released;
      if (!hand) report = report_if_due_locked(send);
    }
  }
  if (hand) {
    const StagedSendJob& job = *send.job;
    const std::size_t offset = copy.piece * job.ring.piece_bytes;
    const std::size_t length = std::min(job.ring.piece_bytes, job.bytes - offset);
    try {
      job.write(job.slots[copy.slot].get(), offset, length,
                [this, owner = copy.send, slot = copy.slot] { written(owner, slot); });
      std::lock_guard lock(mutex_);
      send.handed_any = true;
    } catch (...) {
      std::lock_guard lock(mutex_);
      report = fail_locked(send, std::current_exception());
    }
  }
  if (report) report();
}

void StagedSender::written(const std::shared_ptr<Send>& send, std::size_t slot) {
  std::function<void()> sent;
  {
    std::lock_guard lock(mutex_);
    ++send->pieces_written;
    if (send->failed || send->released) return;
    if (send->pieces_written == send->job->ring.pieces) {
      finish_locked(send);
      sent = send->job->on_sent;
    } else if (send->next_piece < send->job->ring.pieces) {
      free_slots_.emplace_back(send, slot);
      wake_.notify_one();
    }
  }
  if (sent) sent();
}

std::function<void()> StagedSender::fail_locked(Send& send, std::exception_ptr error) {
  if (!send.failed) {
    send.failed = true;
    send.error = std::move(error);
  }
  return report_if_due_locked(send);
}

std::function<void()> StagedSender::report_if_due_locked(Send& send) {
  if (!send.failed || send.reported || send.released || send.copies_queued > 0) return {};
  send.reported = true;
  std::erase_if(active_, [&](const std::shared_ptr<Send>& s) { return s.get() == &send; });
  return [job = send.job, error = send.error, partly = send.handed_any] { job->on_failed(error, partly); };
}

void StagedSender::finish_locked(const std::shared_ptr<Send>& send) {
  std::erase(active_, send);
}

bool StagedSender::release(int peer, const Deadline& deadline) {
  {
    std::lock_guard lock(mutex_);
    for (const auto& send : active_) {
      if (send->job->peer == peer) send->released = true;
    }
    std::erase_if(active_, [&](const std::shared_ptr<Send>& send) { return send->job->peer == peer; });
    std::erase_if(free_slots_, [&](const auto& free) { return free.first->job->peer == peer; });
  }
  // Not through the thread: release() may run on it (a send's failure report fails the pair).
  device::host::Backoff backoff;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      bool pending = issuing_peer_ == peer;
      // Copies complete in the stream's order: once the peer's last queued copy is done, all of its are.
      for (auto it = queued_.rbegin(); it != queued_.rend() && !pending; ++it) {
        if (it->send->job->peer != peer) continue;
        try {
          pending = !it->done->query();
        } catch (const std::exception&) {
          pending = false;  // the stream failed: it copies nothing any more
        }
        break;
      }
      if (!pending) return true;
    }
    if (deadline.expired()) return false;
    backoff.pause();
  }
}

bool StagedSender::drain(const Deadline& deadline) {
  device::host::Backoff backoff;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (active_.empty()) return true;
    }
    if (deadline.expired()) return false;
    backoff.pause();
  }
}

}  // namespace pickle::comm
