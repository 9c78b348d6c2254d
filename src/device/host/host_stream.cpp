// The host stream: one worker thread per stream runs its FIFO in order, so that transports written against Stream
// behave on CPU-only machines as they do on a GPU: copies are memcpy, write_value is a release store, wait_value an
// acquire poll. As a CUDA stream, its queue holds a bounded number of operations (PICKLE_HOST_STREAM_DEPTH), and
// queuing on a full one waits until the stream has run some of them: code that queues stream work while holding
// something the stream's own progress needs (a lock its callbacks take, a thread that delivers the signal it waits
// for) hangs here on CPU as it would on a GPU, where the CPU tests can see it.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/backends.hpp"
#include "device/host/backoff.hpp"

namespace pickle::device::host {
namespace {

/// How long a destroyed stream lets pending waits finish before it drops them (and everything after them).
constexpr std::chrono::milliseconds kDestroyGrace{1000};

/// Shared by a HostEvent and the stream operations that record or wait on it, so that destroying the event while
/// operations are queued is harmless.
struct EventState {
  std::mutex mutex;
  std::condition_variable changed;
  std::uint64_t recorded = 0;   // records enqueued
  std::uint64_t completed = 0;  // highest record that the stream reached
  std::set<std::uint64_t> dropped;  // records that their stream dropped unreached (it was destroyed while stuck)
  std::int64_t time_ns = 0;     // when it was reached

  void complete(std::uint64_t sequence) {
    {
      std::lock_guard lock(mutex);
      if (sequence > completed) {
        completed = sequence;
        time_ns = now_ns();
      }
    }
    changed.notify_all();
  }
  void drop(std::uint64_t sequence) {
    {
      std::lock_guard lock(mutex);
      dropped.insert(sequence);
    }
    changed.notify_all();
  }
  /// Whether a wait for `sequence` can never pass: that record was dropped, and no later one has completed (mutex
  /// held). A record dropped after it says nothing about it: it may still complete on its own stream.
  bool never_reached_locked(std::uint64_t sequence) const {
    return completed < sequence && dropped.count(sequence) != 0;
  }
};

class HostEvent final : public Event {
 public:
  MemoryKind kind() const noexcept override { return MemoryKind::Host; }
  bool query() override {
    std::lock_guard lock(state_->mutex);
    if (state_->never_reached_locked(state_->recorded)) throw_dropped("query");
    return state_->completed >= state_->recorded;
  }
  void synchronize_until(const Deadline& deadline) override {
    std::unique_lock lock(state_->mutex);
    while (state_->completed < state_->recorded) {
      if (state_->never_reached_locked(state_->recorded)) throw_dropped("synchronize");
      if (deadline.expired()) {
        throw TimeoutError(cat("event synchronize: the latest record has not completed after ",
                               static_cast<double>(deadline.timeout().count()) / 1000.0,
                               " s (is its stream stuck on a wait_value?)"));
      }
      state_->changed.wait_for(lock, std::chrono::milliseconds(std::max(1, deadline.remaining_ms())));
    }
  }
  float elapsed_ms(const Event& start) const override {
    const auto* other = dynamic_cast<const HostEvent*>(&start);
    if (other == nullptr) throw InvalidArgument("event elapsed_ms: the start event is not a host event");
    std::int64_t begin = other->completed_time("start");
    std::int64_t end = completed_time("end");
    return static_cast<float>(static_cast<double>(end - begin) / 1e6);
  }
  void* native_handle() const noexcept override { return nullptr; }

  const std::shared_ptr<EventState>& state() const { return state_; }

 private:
  [[noreturn]] static void throw_dropped(const char* op) {
    throw Error(ErrorCode::System, cat("event ", op, ": the latest record was dropped unreached (its stream was "
                                       "destroyed while stuck, or refused it)"));
  }
  std::int64_t completed_time(const char* which) const {
    std::lock_guard lock(state_->mutex);
    if (state_->recorded == 0 || state_->completed < state_->recorded) {
      throw InvalidArgument(cat("event elapsed_ms: the ", which, " event is not recorded or not complete"));
    }
    return state_->time_ns;
  }

  std::shared_ptr<EventState> state_ = std::make_shared<EventState>();
};

struct Op {
  enum class Kind { None, Copy, WriteValue, WaitValue, Callback, Record, WaitEvent } kind = Kind::None;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  std::uint32_t* flag = nullptr;
  std::uint32_t value = 0;
  std::function<void()> fn{};
  std::shared_ptr<EventState> event{};
  std::uint64_t sequence = 0;
};

/// Queue entries an operation takes, as on a CUDA stream: pickle's CUDA host callback is two stream operations (a
/// write of its count, a wait for the callback thread's reply), and a CUDA stream's queue took 510 of them before
/// the caller blocked (docs/results/2026-11-29c-h200.md).
std::size_t entries_of(const Op& op) { return op.kind == Op::Kind::Callback ? 2 : 1; }

/// PICKLE_HOST_STREAM_DEPTH: the entries a stream's queue holds; 0 for no bound. Read when a stream is made.
std::size_t depth_from_env() {
  const long long value = env::get_int("PICKLE_HOST_STREAM_DEPTH");
  if (value < 0) throw InvalidArgument(cat("PICKLE_HOST_STREAM_DEPTH=", value, ": must be 0 (no bound) or more"));
  return static_cast<std::size_t>(value);
}

class HostStream final : public Stream {
 public:
  HostStream() : depth_(depth_from_env()), worker_([this] { run(); }) {}

  ~HostStream() override {
    std::unique_lock lock(mutex_);
    stopping_ = true;
    work_.notify_all();
    room_.notify_all();
    if (!idle_.wait_for(lock, kDestroyGrace, [&] { return idle_locked(); })) {
      try {
        PICKLE_LOG(Warn, "device", "host stream destroyed while busy: " << describe_current_locked()
                                                                       << "; dropping it and what follows");
      } catch (...) {  // logging must not turn a destructor into std::terminate
      }
      abandon_.store(true, std::memory_order_relaxed);
    }
    lock.unlock();
    worker_.join();
  }

  MemoryKind kind() const noexcept override { return MemoryKind::Host; }
  int device() const noexcept override { return -1; }
  void* native_handle() const noexcept override { return nullptr; }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0 && (dst == nullptr || src == nullptr)) {
      throw InvalidArgument(describe({.op = "host stream copy", .bytes = bytes}) + ": null pointer");
    }
    if (bytes == 0) return;
    push(Op{.kind = Op::Kind::Copy, .dst = dst, .src = src, .bytes = bytes});
  }

  void write_value(std::uint32_t* addr, std::uint32_t value) override {
    check_flag_address(addr, "write_value");
    push(Op{.kind = Op::Kind::WriteValue, .flag = addr, .value = value});
  }

  void wait_value(const std::uint32_t* addr, std::uint32_t value) override {
    check_flag_address(addr, "wait_value");
    push(Op{.kind = Op::Kind::WaitValue, .flag = const_cast<std::uint32_t*>(addr), .value = value});
  }

  void host_callback(std::function<void()> fn) override {
    if (!fn) throw InvalidArgument("host stream host_callback: empty function");
    push(Op{.kind = Op::Kind::Callback, .fn = std::move(fn)});
  }

  void record(Event& event) override {
    auto& state = host_event(event, "record").state();
    std::uint64_t sequence;
    {
      std::lock_guard lock(state->mutex);
      sequence = ++state->recorded;
    }
    push(Op{.kind = Op::Kind::Record, .event = state, .sequence = sequence});
  }

  void wait(Event& event) override {
    auto& state = host_event(event, "wait").state();
    std::uint64_t sequence;
    {
      std::lock_guard lock(state->mutex);
      sequence = state->recorded;
    }
    if (sequence == 0) return;  // never recorded: nothing to wait for (as cudaStreamWaitEvent)
    push(Op{.kind = Op::Kind::WaitEvent, .event = state, .sequence = sequence});
  }

  std::size_t queue_depth() const noexcept override { return depth_; }

  bool idle_now() noexcept override {
    std::lock_guard lock(mutex_);
    return idle_locked();
  }

  bool query_operations() override {
    std::lock_guard lock(mutex_);
    rethrow_error_locked();
    return idle_locked();
  }

  void synchronize_operations_until(const Deadline& deadline) override {
    std::unique_lock lock(mutex_);
    while (!idle_locked() && !deadline.expired()) {
      idle_.wait_for(lock, std::chrono::milliseconds(std::max(1, deadline.remaining_ms())));
    }
    rethrow_error_locked();
    if (!idle_locked()) {
      throw TimeoutError(cat("stream synchronize: still busy after ",
                             static_cast<double>(deadline.timeout().count()) / 1000.0, " s; ",
                             describe_current_locked()));
    }
  }

 private:
  static HostEvent& host_event(Event& event, const char* op) {
    auto* host = dynamic_cast<HostEvent*>(&event);
    if (host == nullptr) {
      throw InvalidArgument(cat("host stream ", op, ": the event is a ", memory_kind_name(event.kind()),
                                " event; host streams take host events only"));
    }
    return *host;
  }

  void push(Op op) {
    {
      std::unique_lock lock(mutex_);
      // A full queue waits for the stream, except on the stream's own thread (a callback queuing on its stream),
      // which would wait for itself. (CUDA forbids stream calls in callbacks: pickle's CUDA code makes none.)
      const std::size_t entries = entries_of(op);
      if (depth_ != 0 && std::this_thread::get_id() != worker_.get_id()) {
        room_.wait(lock, [&] {
          return queued_entries_ + entries <= depth_ || queue_.empty() || stopping_ || gave_up_;
        });
      }
      if (gave_up_) {
        // Refused, as what followed the wait that gave up was dropped, until its error is reported: the work it was
        // to follow never happened, and a copy queued now (one operation at a time, as a send is) would move data
        // that it never produced. The caller hears it at once (a CUDA stream with an error fails its enqueues too):
        // error_ is set whenever gave_up_ is, and both are cleared together (rethrow_error_locked).
        std::exception_ptr error = error_;
        lock.unlock();
        if (op.kind == Op::Kind::Record) op.event->drop(op.sequence);  // recorded, and never to be reached
        std::rethrow_exception(error);
      }
      queued_entries_ += entries;
      queue_.push_back(std::move(op));
    }
    work_.notify_one();
  }

  bool idle_locked() const { return queue_.empty() && !running_; }

  void rethrow_error_locked() {
    if (!error_) return;
    gave_up_ = false;  // reported: the stream takes work again
    std::rethrow_exception(std::exchange(error_, nullptr));
  }

  std::string describe_current_locked() const {
    std::string what;
    switch (current_.kind) {
      case Op::Kind::WaitValue:
        what = cat("a wait_value on ", static_cast<const void*>(current_.flag), " for >= ", current_.value,
                   " may never be satisfied (the flag reads ", load_acquire(current_.flag), ")");
        break;
      case Op::Kind::WaitEvent: what = "a wait on an event whose record has not completed"; break;
      case Op::Kind::Callback: what = "a host callback has not returned"; break;
      case Op::Kind::Copy: what = cat("a copy of ", current_.bytes, " bytes is running"); break;
      default: what = "an operation is running"; break;
    }
    if (!queue_.empty()) what += cat(", ", queue_.size(), " more queued");
    return what;
  }

  /// How an operation ended: it ran; or it was a wait given up because this stream is being destroyed, or because
  /// it waited for an event whose record another stream dropped (destroyed while stuck). What follows either is
  /// dropped: running it would break the stream's order (a copy of data the awaited work never produced). After the
  /// second, what is queued is refused until the stream's error is reported (gave_up_).
  enum class Outcome { Ran, Abandoned, AwaitedRecordDropped };

  Outcome execute(Op& op) {
    switch (op.kind) {
      case Op::Kind::Copy: std::memmove(op.dst, op.src, op.bytes); return Outcome::Ran;
      case Op::Kind::WriteValue:
        // Release: the copies this thread made before are visible to whoever acquires the new value.
        std::atomic_ref<std::uint32_t>(*op.flag).store(op.value, std::memory_order_release);
        return Outcome::Ran;
      case Op::Kind::WaitValue: {
        Backoff backoff;
        while (!flag_reached(load_acquire(op.flag), op.value)) {
          if (abandon_.load(std::memory_order_relaxed)) return Outcome::Abandoned;
          backoff.pause();
        }
        return Outcome::Ran;
      }
      case Op::Kind::Callback:
        try {
          op.fn();
        } catch (...) {
          std::lock_guard lock(mutex_);
          if (!error_) error_ = std::current_exception();
        }
        return Outcome::Ran;
      case Op::Kind::Record: op.event->complete(op.sequence); return Outcome::Ran;
      case Op::Kind::WaitEvent: {
        std::unique_lock lock(op.event->mutex);
        while (op.event->completed < op.sequence) {
          if (abandon_.load(std::memory_order_relaxed)) return Outcome::Abandoned;
          if (op.event->never_reached_locked(op.sequence)) return Outcome::AwaitedRecordDropped;
          op.event->changed.wait_for(lock, std::chrono::milliseconds(1));
        }
        return Outcome::Ran;
      }
      case Op::Kind::None: return Outcome::Ran;
    }
    return Outcome::Ran;
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      work_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything ran
      current_ = std::move(queue_.front());
      queue_.pop_front();
      queued_entries_ -= entries_of(current_);
      room_.notify_all();
      running_ = true;
      lock.unlock();
      const Outcome outcome = execute(current_);
      // Destroy the finished operation (and anything dropped) outside the lock: their captures may do anything.
      std::deque<Op> dropped;
      Op finished;
      lock.lock();
      finished = std::move(current_);
      current_ = Op{};
      running_ = false;
      if (outcome != Outcome::Ran) {
        if (outcome == Outcome::AwaitedRecordDropped) {
          gave_up_ = true;
          if (!error_) {
            error_ = std::make_exception_ptr(Error(
                ErrorCode::System, cat("host stream: a wait for an event whose record was dropped unreached (its "
                                       "stream was destroyed while stuck); the ", queue_.size(), " operation(s) "
                                       "queued after it were dropped, and it takes no work until this error is "
                                       "reported")));
          }
        }
        dropped.swap(queue_);
        queued_entries_ = 0;
        room_.notify_all();
      }
      idle_.notify_all();
      lock.unlock();
      // A stream waiting for a record dropped here would wait for ever: it gives up its wait instead.
      for (const Op& op : dropped) {
        if (op.kind == Op::Kind::Record) op.event->drop(op.sequence);
      }
      dropped.clear();
      finished = Op{};
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_;  // the worker waits for operations
  std::condition_variable idle_;  // synchronize and the destructor wait for operations to finish
  std::condition_variable room_;  // callers wait for room in a full queue
  std::deque<Op> queue_;
  const std::size_t depth_;  // PICKLE_HOST_STREAM_DEPTH when the stream was made
  std::size_t queued_entries_ = 0;  // entries_of() summed over queue_
  Op current_;  // the running operation; written by the worker under mutex_, read by describe under mutex_
  bool running_ = false;
  bool stopping_ = false;
  std::atomic<bool> abandon_{false};
  std::exception_ptr error_;
  bool gave_up_ = false;  // a wait gave up (AwaitedRecordDropped): new work is refused until error_ is reported
  std::thread worker_;  // last: it starts in the constructor and uses everything above
};

}  // namespace

std::unique_ptr<Stream> make_stream() { return std::make_unique<HostStream>(); }
std::unique_ptr<Event> make_event() { return std::make_unique<HostEvent>(); }

}  // namespace pickle::device::host
