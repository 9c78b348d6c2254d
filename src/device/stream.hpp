#pragma once
// Streams and events: the one execution model of every transport. A Stream is a FIFO: each operation starts after
// the previous one finished. On CUDA it is a cudaStream_t whose flag operations (cuStreamWriteValue32 /
// cuStreamWaitValue32) use no SMs; on Host a worker thread runs the same operations, so that transport code tested
// on CPU-only machines is the code that runs on GPUs.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "device/memory.hpp"

namespace pickle::device {

/// A point in a stream's order that the host or another stream can wait for, and time.
class Event {
 public:
  virtual ~Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  virtual MemoryKind kind() const noexcept = 0;
  /// True when the work before the latest record() has completed (or record() was never called).
  virtual bool query() = 0;
  /// Waits for query() to become true, for at most PICKLE_TIMEOUT seconds (TimeoutError after that).
  void synchronize();
  virtual void synchronize_until(const Deadline& deadline) = 0;
  /// Milliseconds between `start`'s completion and this event's; both must be recorded, complete, and of the
  /// same kind (InvalidArgument otherwise).
  virtual float elapsed_ms(const Event& start) const = 0;
  /// cudaEvent_t for Cuda events, nullptr for Host.
  virtual void* native_handle() const noexcept = 0;

 protected:
  Event() = default;
};

class Stream;

/// A host-side check of what a stream's work produced (did every message of a collective arrive?), to run once the
/// stream has passed the point where it was added (Stream::check_when_passed). Shared by the stream, which runs it
/// from query() and synchronize(), and by whoever owns what the check looks at (a communicator), which settles it
/// before that goes away. It runs once; the first caller runs it.
class PassedCheck {
 public:
  PassedCheck(std::shared_ptr<Event> passed, std::function<void()> check);
  PassedCheck(const PassedCheck&) = delete;
  PassedCheck& operator=(const PassedCheck&) = delete;

  /// Runs the check if the stream has passed its point and it has not run yet; true once it has run.
  bool run_if_passed();
  /// Whether the stream has passed the check's point: seen before, or an event query now (which throws what a failed
  /// query throws). False for a check that settle gave up on.
  bool reached();
  /// Runs the check, which must have reached() (or come before one that has, on its stream), if it has not run yet.
  void run_reached();
  /// Whether the check has run or settle gave up on it.
  bool has_run();
  /// Makes `waiter` wait (on the device) until the check's stream has passed the check's point: a wait on its event,
  /// or nothing once the check has run there. So the end of a call serves also as the point that a later call on
  /// another stream waits for, without a second event record per call (the mailboxes' calls). A check given up
  /// before its stream reached the point (settle, a dropped record) cannot order anything: Error (System).
  void order_after(Stream& waiter);
  /// Waits (bounded) for the stream to pass the point, then runs the check. Past `deadline` the check is not run
  /// (what it looks at is about to go): its outcome becomes a TimeoutError that starts with `unsettled`.
  /// Afterwards the check holds nothing of what it captured.
  void settle(const Deadline& deadline, const std::string& unsettled);
  /// What the check threw, once (null when it passed or has not run).
  std::exception_ptr take_error();
  /// The event of a check that ran after its stream passed it (complete, so it may be recorded again); null
  /// otherwise, and once taken.
  std::shared_ptr<Event> take_passed_event();

 private:
  void run_locked();

  std::mutex mutex_;
  std::shared_ptr<Event> passed_;  // shared: handed on to the stream for a later check once the check ran
  std::function<void()> check_;
  bool ran_ = false;
  bool reached_ = false;  // the stream passed the point (ran_ without it: settle gave up)
  std::exception_ptr error_;
};

/// A FIFO of copies, flag writes/waits, host callbacks and event records/waits.
///
/// Ordering: write_value is a release: every earlier operation on the stream (in particular copies into a peer's
/// memory) is visible to whoever observes the new value. wait_value blocks the stream (not the caller) until the
/// flag satisfies "value is at or past" the target, compared as CUDA's CU_STREAM_WAIT_VALUE_GEQ does:
/// (int32_t)(*addr - value) >= 0, which equals *addr >= value as unsigned while the two are less than 2^31 apart
/// (so counters may wrap around). Later operations see everything that the writer published before the flag.
/// Flags must be 4-byte aligned and, for Cuda streams, device-accessible (device memory, imported peer memory, or
/// cudaHostAlloc/cudaHostRegister host memory).
///
/// Errors: enqueueing checks its arguments (InvalidArgument) and the CUDA call (CudaError). A host callback or a passed
/// check that throws does not stop the stream: its exception is kept and rethrown by the next query() or synchronize().
/// All methods may be called from any thread; operations keep the order in which their calls returned.
///
/// Streams that a std::shared_ptr owns (the application's, through pickle::Stream) hand out weak references
/// (weak_from_this): a communicator keeps them to check, when it is destroyed, that they have passed their waits on its
/// words before it frees them.
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  virtual MemoryKind kind() const noexcept = 0;
  /// CUDA ordinal, -1 for Host.
  virtual int device() const noexcept = 0;

  /// Copies `bytes` (0 allowed) from src to dst, both addressable by this stream's kind (for Cuda: any
  /// UVA pointers, cudaMemcpyDefault). Regions must not overlap.
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  /// One copy of copies().
  struct Copy {
    void* dst;
    const void* src;
    std::size_t bytes;
  };
  /// The copies, as one stream operation where the backend can batch them (CUDA: cudaMemcpyBatchAsync, whose copies
  /// may run at once on several copy engines): in no particular order among themselves, so none may depend on
  /// another.
  virtual void copies(std::span<const Copy> batch);
  /// Stores `value` into *addr after all earlier operations completed (release).
  virtual void write_value(std::uint32_t* addr, std::uint32_t value) = 0;
  /// Holds later operations until *addr is at or past `value` (see the class comment for the comparison).
  virtual void wait_value(const std::uint32_t* addr, std::uint32_t value) = 0;
  /// One flag of write_values / wait_values.
  struct Flag {
    std::uint32_t* addr;
    std::uint32_t value;
  };
  /// write_value of each flag, as one stream operation where the backend can batch them (CUDA: cuStreamBatchMemOp):
  /// each is a release of the earlier operations, in no particular order among themselves.
  virtual void write_values(std::span<const Flag> flags);
  /// wait_value of each flag, as one operation where the backend can batch them: later operations wait for all.
  virtual void wait_values(std::span<const Flag> flags);
  /// Says that a kernel just enqueued waits in GPU code for `words` words, the last of them *addr to reach `value`
  /// (the gated reduction of the allreduce mailboxes): a synchronize that times out then names that wait, not an
  /// older wait_value, as what the stream may be stuck on. Enqueues nothing; Host streams run no kernels.
  virtual void note_wait_in_kernel(const std::uint32_t* addr, std::uint32_t value, int words) {
    (void)addr, (void)value, (void)words;
  }
  /// Runs `fn` on a helper thread once earlier operations completed; later operations wait for it to return.
  /// For Cuda streams, `fn` must not call CUDA.
  virtual void host_callback(std::function<void()> fn) = 0;
  /// Marks the current end of the stream in `event` (same kind and device, else InvalidArgument).
  virtual void record(Event& event) = 0;
  /// Holds later operations until `event`'s latest record (as of this call) has completed. Same kind only.
  virtual void wait(Event& event) = 0;
  /// Runs `check` on the host once every operation enqueued before this call has completed: from the first query()
  /// or synchronize() that finds them complete (which then throws what `check` threw), or from a later
  /// check_when_passed, or when the returned handle is settled. Unlike host_callback it costs the stream nothing but
  /// an event record: a host callback holds the stream for a round trip through a host thread (about 65 us measured
  /// per collective on 2 x H200). `check` must not call this stream.
  std::shared_ptr<PassedCheck> check_when_passed(std::function<void()> check);
  /// True when every enqueued operation has completed (and every check they passed has run).
  bool query();
  /// True when nothing is queued or running on the stream at this moment: a few operations queued right after
  /// cannot wait for room, unless another thread fills it meanwhile. Unlike query(), it runs no check and reports
  /// no error (false when the stream cannot tell).
  virtual bool idle_now() noexcept = 0;
  /// Waits for every enqueued operation, for at most PICKLE_TIMEOUT seconds; then a TimeoutError that names what the
  /// stream may be stuck on. Never hangs. The stream stays usable: a flag written later still releases it.
  void synchronize();
  void synchronize_until(const Deadline& deadline);
  /// cudaStream_t for Cuda streams, nullptr for Host.
  virtual void* native_handle() const noexcept = 0;
  /// The entries this stream's queue holds before a caller that queues more waits for room (a host callback takes
  /// two, any other operation one), or 0 where that is not known or there is no bound: a host stream's
  /// PICKLE_HOST_STREAM_DEPTH. CUDA publishes no bound (about 1024 measured: docs/results/2026-11-29c-h200.md): 0.
  virtual std::size_t queue_depth() const noexcept { return 0; }
  /// Unique among the streams this process ever made (an address or a cudaStream_t can be reused after a stream is
  /// destroyed; this never is): "is this the stream that work went to" must not mistake a new stream for an old one.
  std::uint64_t serial() const noexcept { return serial_; }

 protected:
  Stream();
  /// The backend's part of query(): true when every enqueued operation has completed; rethrows a host callback's
  /// exception.
  virtual bool query_operations() = 0;
  /// The backend's part of synchronize_until().
  virtual void synchronize_operations_until(const Deadline& deadline) = 0;

 private:
  /// Runs the checks the stream has passed, in order, and rethrows the first exception one of them threw.
  void run_passed_checks();
  /// Runs the checks the stream has passed, in order; keeps the first exception in check_error_ (checks_mutex_ held).
  void run_passed_checks_locked();

  std::uint64_t serial_;
  std::mutex checks_mutex_;
  std::deque<std::shared_ptr<PassedCheck>> checks_;  // in stream order, not yet run
  std::vector<std::shared_ptr<Event>> spare_events_;  // of checks that ran: recorded again by later checks
  std::exception_ptr check_error_;                   // thrown by a check that ran outside query/synchronize
};

/// A stream of `kind` on `device` (the CUDA ordinal; ignored for Host). Cuda without a GPU: UnavailableError.
std::unique_ptr<Stream> make_stream(MemoryKind kind, int device = 0);
/// An event with timing for streams of `kind` on `device`.
std::unique_ptr<Event> make_event(MemoryKind kind, int device = 0);
/// An event for ordering streams and for queries only: elapsed_ms fails on it. On CUDA it keeps no timestamp, which
/// makes its records and waits cheaper (cudaEventDisableTiming); what the communicator uses inside.
std::unique_ptr<Event> make_ordering_event(MemoryKind kind, int device = 0);

}  // namespace pickle::device
