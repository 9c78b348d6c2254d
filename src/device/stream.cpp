#include "device/stream.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/error_text.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"
#include "device/host/backoff.hpp"

namespace pickle::device {

void check_flag_address(const void* addr, std::string_view op) {
  if (addr == nullptr) throw InvalidArgument(cat("stream ", op, ": the flag address is null"));
  if (reinterpret_cast<std::uintptr_t>(addr) % alignof(std::uint32_t) != 0) {
    throw InvalidArgument(cat("stream ", op, ": the flag address ", addr, " is not 4-byte aligned"));
  }
}

void Event::synchronize() { synchronize_until(Deadline::after_seconds(env::timeout_seconds())); }

Stream::Stream() {
  static std::atomic<std::uint64_t> next{1};
  serial_ = next.fetch_add(1, std::memory_order_relaxed);
}

void Stream::copies(std::span<const Copy> batch) {
  for (const Copy& one : batch) copy(one.dst, one.src, one.bytes);
}

void Stream::write_values(std::span<const Flag> flags) {
  for (const Flag& flag : flags) write_value(flag.addr, flag.value);
}

void Stream::wait_values(std::span<const Flag> flags) {
  for (const Flag& flag : flags) wait_value(flag.addr, flag.value);
}

void Stream::synchronize() { synchronize_until(Deadline::after_seconds(env::timeout_seconds())); }

bool Stream::query() {
  const bool done = query_operations();
  run_passed_checks();
  return done;
}

void Stream::synchronize_until(const Deadline& deadline) {
  synchronize_operations_until(deadline);
  run_passed_checks();
}

namespace {
/// check_when_passed looks for passed checks only once this many are queued: the scan's event query of a point not
/// passed yet cost about 2.4 us of a small allreduce's 11 us of host time (two H200s, coll_time_probe with
/// PROBE_PROFILE, docs/results/2026-11-30e-h200x2.md), and the stream is usually a call or more behind its host. At
/// 16 a scan (five or so queries, and the checks it ran) still took 8-14 us, about 0.8 us per call of a 4 KB
/// allreduce (2026-12-01, bench coll with a diagnostic timer of the host's phases); halving over 64 takes a query or
/// two more, once per 64 calls. A query or synchronize of the stream still runs every check it has passed first.
constexpr std::size_t kChecksBeforeScan = 64;
/// Events of checks that ran, kept per stream for later checks: as many as a scan lets queue.
constexpr std::size_t kSpareEvents = kChecksBeforeScan;
}  // namespace

std::shared_ptr<PassedCheck> Stream::check_when_passed(std::function<void()> check) {
  if (!check) throw InvalidArgument("stream check_when_passed: empty function");
  std::lock_guard lock(checks_mutex_);  // records and the queue in the same order: the queue is in stream order
  // An event per check in flight, reused once its check ran: creating one costs a driver call.
  std::shared_ptr<Event> passed;
  if (spare_events_.empty()) {
    passed = make_ordering_event(kind(), std::max(0, device()));
  } else {
    passed = std::move(spare_events_.back());
    spare_events_.pop_back();
  }
  record(*passed);
  auto entry = std::make_shared<PassedCheck>(std::move(passed), std::move(check));
  checks_.push_back(entry);
  // Checks the stream has passed run from time to time, so that a stream that is never queried holds only about
  // kChecksBeforeScan checks besides those still in flight; what they threw (or a failed event query) waits for the
  // next query or synchronize.
  if (checks_.size() < kChecksBeforeScan) return entry;
  try {
    run_passed_checks_locked();
  } catch (...) {
    if (!check_error_) check_error_ = std::current_exception();
  }
  return entry;
}

void Stream::run_passed_checks() {
  std::exception_ptr first;
  {
    std::lock_guard lock(checks_mutex_);
    run_passed_checks_locked();
    first = std::exchange(check_error_, nullptr);
  }
  if (first) std::rethrow_exception(first);
}

void Stream::run_passed_checks_locked() {
  // The stream passes its points in order: once it has passed one check's point, it has passed every earlier one.
  // The newest passed check is found by halving (a few event queries for many checks; each query costs about a
  // microsecond of driver time, which one per collective call made a small allreduce pay), and every check up to it
  // runs.
  const auto pop_front = [this] {
    std::exception_ptr error = checks_.front()->take_error();
    if (error && !check_error_) check_error_ = error;
    if (auto event = checks_.front()->take_passed_event(); event && spare_events_.size() < kSpareEvents) {
      spare_events_.push_back(std::move(event));
    }
    checks_.pop_front();
  };
  // Checks that ran already (settled by their owner, or given up on) leave first, without a query.
  while (!checks_.empty() && checks_.front()->has_run()) pop_front();
  std::size_t passed = 0, not_passed = checks_.size();  // checks_[0, passed) passed; checks_[not_passed, ...) not
  bool searched = true;
  try {
    // The oldest first: a host far ahead of its stream then pays one query per scan, not one per halving.
    if (!checks_.empty()) {
      if (checks_.front()->reached()) {
        passed = 1;
      } else {
        not_passed = 0;
      }
    }
    while (passed < not_passed) {
      const std::size_t middle = passed + (not_passed - passed) / 2;
      if (checks_[middle]->reached()) {
        passed = middle + 1;
      } else {
        not_passed = middle;
      }
    }
  } catch (...) {
    // An event that cannot be queried: one by one from the front, so that its check reports it in its place.
    searched = false;
    passed = 0;
  }
  for (; passed > 0; --passed) {
    checks_.front()->run_reached();
    pop_front();
  }
  if (searched) return;  // the rest are not passed
  while (!checks_.empty() && checks_.front()->run_if_passed()) pop_front();
}

PassedCheck::PassedCheck(std::shared_ptr<Event> passed, std::function<void()> check)
    : passed_(std::move(passed)), check_(std::move(check)) {}

bool PassedCheck::run_if_passed() {
  std::lock_guard lock(mutex_);
  if (ran_) return true;
  try {
    if (!passed_->query()) return false;
  } catch (const std::exception& e) {
    // The point will never be reached (a host stream dropped its record): the check cannot run, and the checks
    // after it must not wait for it. Its error says so in its place.
    ran_ = true;
    check_ = nullptr;
    passed_.reset();
    error_ = std::make_exception_ptr(
        Error(ErrorCode::System, cat("a check queued on the stream never ran: ", without_head(e.what()))));
    return true;
  }
  run_locked();
  return true;
}

void PassedCheck::settle(const Deadline& deadline, const std::string& unsettled) {
  // Polled under the lock rather than waited for outside it: once the check ran (from a query of its stream, on
  // another thread), its event goes back to the stream and may be recorded again, at a later point.
  for (host::Backoff backoff;; backoff.pause()) {
    {
      std::lock_guard lock(mutex_);
      if (ran_) return;
      std::string why;
      try {
        if (passed_->query()) {
          run_locked();
          return;
        }
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (why.empty() && deadline.expired()) why = "the stream had not passed it at the deadline";
      if (!why.empty()) {
        ran_ = true;
        check_ = nullptr;
        passed_.reset();
        error_ = std::make_exception_ptr(TimeoutError(cat(unsettled, " (", why, ")")));
        return;
      }
    }
  }
}

std::exception_ptr PassedCheck::take_error() {
  std::lock_guard lock(mutex_);
  return std::exchange(error_, nullptr);
}

std::shared_ptr<Event> PassedCheck::take_passed_event() {
  std::lock_guard lock(mutex_);
  if (!ran_) return nullptr;
  // Lent to order_after, which waits on it outside the lock: not recorded again (it goes when the last holder lets go).
  if (passed_.use_count() > 1) {
    passed_.reset();
    return nullptr;
  }
  return std::move(passed_);
}

bool PassedCheck::reached() {
  std::lock_guard lock(mutex_);
  return ran_ ? reached_ : passed_->query();
}

void PassedCheck::order_after(Stream& waiter) {
  std::shared_ptr<Event> point;
  {
    std::lock_guard lock(mutex_);
    if (ran_ && reached_) return;  // the stream has passed the point
    if (ran_) {
      // Given up (settle's deadline, or a record its host stream dropped): the point may never be reached, and
      // nothing is left to wait on. Going on would let what follows overtake it.
      throw Error(ErrorCode::System,
                  "a point to order after was given up before its stream reached it (the stream "
                  "dropped it, or it was settled at a deadline)");
    }
    // Lent: take_passed_event does not hand it on for a later record while this copy is held, so the wait below
    // (outside the lock: it may block for room in the waiter's queue) is on this point.
    point = passed_;
  }
  waiter.wait(*point);
}

bool PassedCheck::has_run() {
  std::lock_guard lock(mutex_);
  return ran_;
}

void PassedCheck::run_reached() {
  std::lock_guard lock(mutex_);
  if (!ran_) run_locked();
}

void PassedCheck::run_locked() {
  // Only once the stream passed the event (settle drops an event it gave up on): take_passed_event hands it on.
  ran_ = true;
  reached_ = true;
  // Whatever the check captured goes with it, now: its owner may be about to go.
  std::function<void()> check = std::move(check_);
  check_ = nullptr;
  try {
    check();
  } catch (...) {
    error_ = std::current_exception();
  }
}

std::unique_ptr<Stream> make_stream(MemoryKind kind, int device) {
  return kind == MemoryKind::Host ? host::make_stream() : cuda::make_stream(device);
}

std::unique_ptr<Event> make_event(MemoryKind kind, int device) {
  return kind == MemoryKind::Host ? host::make_event() : cuda::make_event(device, true);
}

std::unique_ptr<Event> make_ordering_event(MemoryKind kind, int device) {
  return kind == MemoryKind::Host ? host::make_event() : cuda::make_event(device, false);
}

}  // namespace pickle::device
