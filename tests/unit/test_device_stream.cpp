// The host stream in one process: order, release/acquire through flags, callbacks, events, bounded waits.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "device/host/backoff.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "poll_for_seconds.hpp"

namespace pickle::device {
namespace {

/// Sets PICKLE_TIMEOUT for one test.
class ScopedTimeout {
 public:
  explicit ScopedTimeout(const char* seconds) { setenv("PICKLE_TIMEOUT", seconds, 1); }
  ~ScopedTimeout() { unsetenv("PICKLE_TIMEOUT"); }
};

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>((i * 131 + seed * 17 + (i >> 8)) & 0xff);
  return out;
}

using test::poll_for_seconds;

TEST(HostStream, FlagOrdersCopiesBetweenStreams) {
  constexpr std::size_t kBytes = (1 << 20) + 5;
  constexpr unsigned kRounds = 6;
  auto shared = allocate(MemoryKind::Host, kBytes + 4096);
  auto* flag = static_cast<std::uint32_t*>(shared->data());
  auto* ack = flag + 16;
  auto* middle = static_cast<unsigned char*>(shared->data()) + 4096;
  std::vector<std::vector<unsigned char>> sources, results(kRounds, std::vector<unsigned char>(kBytes));
  for (unsigned r = 0; r < kRounds; ++r) sources.push_back(pattern(kBytes, r));

  auto consumer = make_stream(MemoryKind::Host);
  auto producer = make_stream(MemoryKind::Host);
  // The consumer is enqueued first, so that it really has to wait for the producer's flags.
  for (unsigned r = 0; r < kRounds; ++r) {
    consumer->wait_value(flag, r + 1);
    consumer->copy(results[r].data(), middle, kBytes);
    consumer->write_value(ack, r + 1);
  }
  for (unsigned r = 0; r < kRounds; ++r) {
    producer->wait_value(ack, r);  // the consumer took the previous round out
    producer->copy(middle, sources[r].data(), kBytes);
    producer->write_value(flag, r + 1);
  }
  consumer->synchronize();
  producer->synchronize();
  for (unsigned r = 0; r < kRounds; ++r) ASSERT_EQ(results[r], sources[r]) << "round " << r;
}

TEST(HostStream, CallbacksRunInOrderOnAnotherThread) {
  auto stream = make_stream(MemoryKind::Host);
  std::vector<int> seen;
  std::vector<int> copied(100, -1);
  std::vector<int> values(100);
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> other_thread{true};
  for (int i = 0; i < 100; ++i) {
    values[i] = i * 3;
    stream->copy(&copied[i], &values[i], sizeof(int));
    stream->host_callback([&, i] {
      if (std::this_thread::get_id() == caller) other_thread = false;
      // The copy enqueued before this callback has happened; the next one has not.
      seen.push_back(copied[i] == i * 3 && (i == 99 || copied[i + 1] == -1) ? i : -1);
    });
  }
  stream->synchronize();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_TRUE(other_thread);
}

TEST(HostStream, CallbackExceptionSurfacesAtSynchronizeAndStreamGoesOn) {
  auto stream = make_stream(MemoryKind::Host);
  int after = 0;
  stream->host_callback([] { throw TimeoutError("from a callback"); });
  stream->host_callback([&] { after = 1; });
  EXPECT_THROW(stream->synchronize(), TimeoutError);
  EXPECT_EQ(after, 1);
  stream->host_callback([&] { after = 2; });
  stream->synchronize();  // the error was reported once
  EXPECT_EQ(after, 2);
}

// A passed check runs on the host once the stream has passed its point, never before, from query or synchronize;
// what it throws is reported once.
TEST(HostStream, ChecksRunOnceTheStreamPassedThem) {
  auto memory = allocate(MemoryKind::Host, 64);
  auto* flag = static_cast<std::uint32_t*>(memory->data());
  *flag = 0;
  auto stream = make_stream(MemoryKind::Host);
  std::atomic<int> ran{0};
  stream->wait_value(flag, 1);
  stream->check_when_passed([&] { ran.fetch_add(1); });
  stream->check_when_passed([&] {
    ran.fetch_add(10);
    throw PeerError("rank 1: allreduce of 4 bytes: peer 0 died", 0);
  });
  stream->wait_value(flag, 2);
  stream->check_when_passed([&] { ran.fetch_add(100); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(stream->query());
  EXPECT_EQ(ran.load(), 0);  // the stream has not passed any of them
  std::atomic_ref<std::uint32_t>(*flag).store(1);
  // The first two are passed now, the third is not: the next query runs the first two and reports the error.
  EXPECT_TRUE(poll_for_seconds(5, [&] {
    try {
      stream->query();
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("peer 0 died"), std::string::npos) << e.what();
      return true;
    }
    return false;
  }));
  EXPECT_EQ(ran.load(), 11);
  std::atomic_ref<std::uint32_t>(*flag).store(2);
  stream->synchronize();  // the error was reported once
  EXPECT_EQ(ran.load(), 111);
}

// A stream nobody queries does not pile up checks: new ones run those already passed (not at every call: once a few
// are queued, since looking costs an event query), and keep what they threw for the next query or synchronize.
TEST(HostStream, NewChecksRunThePassedOnesAndKeepTheirError) {
  auto stream = make_stream(MemoryKind::Host);
  auto captured = std::make_shared<int>(0);
  std::weak_ptr<int> watch = captured;
  auto first = stream->check_when_passed([captured = std::move(captured)] { throw TimeoutError("first check"); });
  first.reset();
  auto event = make_event(MemoryKind::Host);
  stream->record(*event);
  event->synchronize();
  int later_ran = 0, added = 0;
  while (!watch.expired() && added < 128) {
    stream->check_when_passed([&] { ++later_ran; });
    ++added;
  }
  EXPECT_TRUE(watch.expired()) << "128 checks queued and the first, passed long ago, has not run";
  EXPECT_THROW(stream->synchronize(), TimeoutError);
  EXPECT_EQ(later_ran, added);
  stream->synchronize();
}

// The scan for passed checks (by halving, once a few are queued) runs nothing the stream has not passed, also past a
// check that settle gave up on, and runs everything once the stream gets there; the given-up check reports its error
// once.
TEST(HostStream, TheScanRunsNoCheckEarlyAndGetsPastOneThatWasGivenUp) {
  ScopedTimeout timeout("5");
  auto memory = allocate(MemoryKind::Host, 64);
  auto* flag = static_cast<std::uint32_t*>(memory->data());
  *flag = 0;
  auto stream = make_stream(MemoryKind::Host);
  int ran_before = 0;
  for (int i = 0; i < 5; ++i) stream->check_when_passed([&] { ++ran_before; });
  stream->synchronize();
  EXPECT_EQ(ran_before, 5);
  stream->wait_value(flag, 1);
  auto given_up = stream->check_when_passed([] {});
  given_up->settle(Deadline::after_seconds(0.05), "rank 1: allreduce of 8 bytes: given up");
  constexpr int kLater = 150;  // past the scan's threshold (64), which every later check then scans
  std::atomic<int> ran_after{0};
  for (int i = 0; i < kLater; ++i) stream->check_when_passed([&] { ran_after.fetch_add(1); });
  EXPECT_EQ(ran_after.load(), 0) << "a check ran before the stream passed it";
  // The next query reports the given-up check (it leaves the queue first) and runs nothing else.
  try {
    stream->query();
    FAIL() << "the given-up check's error was not reported";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("given up"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ran_after.load(), 0);
  std::atomic_ref<std::uint32_t>(*flag).store(1);
  stream->synchronize();  // reported once
  EXPECT_EQ(ran_after.load(), kLater);
}

// Whoever owns what a check looks at settles it before that goes: after the stream passed, the check runs then; if
// the stream does not pass in time, the check never runs, lets go of what it captured, and the stream reports why.
TEST(HostStream, SettlingRunsAPassedCheckOrReportsOneThatWasNotReached) {
  ScopedTimeout timeout("2");
  auto memory = allocate(MemoryKind::Host, 64);
  auto* flag = static_cast<std::uint32_t*>(memory->data());
  *flag = 0;
  auto stream = make_stream(MemoryKind::Host);
  int ran = 0;
  auto passed = stream->check_when_passed([&] { ran += 1; });
  passed->settle(Deadline::after_seconds(5), "unused");
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(passed->run_if_passed());
  EXPECT_EQ(ran, 1);  // once

  stream->wait_value(flag, 1);
  auto captured = std::make_shared<int>(0);
  std::weak_ptr<int> watch = captured;
  auto held = stream->check_when_passed([&ran, captured = std::move(captured)] { ran += 10; });
  Stopwatch clock;
  held->settle(Deadline::after_seconds(0.2), "rank 3: allgather of 64 bytes: destroyed too early");
  EXPECT_LT(clock.seconds(), 2.0);
  EXPECT_TRUE(watch.expired());
  std::atomic_ref<std::uint32_t>(*flag).store(1);
  try {
    stream->synchronize();
    FAIL() << "the unsettled check was not reported";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3: allgather of 64 bytes: destroyed too early"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ran, 1);  // never ran
  stream->synchronize();
}

// A check takes the event of one that ran before it: recorded again at the new point, it must not say "passed"
// before the stream gets there.
TEST(HostStream, AReusedEventMarksTheNewChecksPoint) {
  auto memory = allocate(MemoryKind::Host, 64);
  auto* flag = static_cast<std::uint32_t*>(memory->data());
  *flag = 0;
  auto stream = make_stream(MemoryKind::Host);
  int first = 0, second = 0;
  stream->check_when_passed([&] { first = 1; });
  stream->synchronize();  // the first check ran: its event is spare now
  EXPECT_EQ(first, 1);
  stream->wait_value(flag, 1);
  stream->check_when_passed([&] { second = 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(stream->query());
  EXPECT_EQ(second, 0);
  std::atomic_ref<std::uint32_t>(*flag).store(1);
  stream->synchronize();
  EXPECT_EQ(second, 1);
}

// A check's point orders another stream after it (the mailboxes' handover between calls on two streams): the other
// stream waits until the first has passed the point, and once the check ran there, not at all, even when its event
// has been recorded again for a later check that the first stream has not reached.
TEST(HostStream, ACheckOrdersAnotherStreamAfterItsPointOnlyUntilItRan) {
  auto memory = allocate(MemoryKind::Host, 64);
  auto* flag = static_cast<std::uint32_t*>(memory->data());
  *flag = 0;
  auto first = make_stream(MemoryKind::Host);
  auto second = make_stream(MemoryKind::Host);
  std::atomic<int> after{0};
  first->wait_value(flag, 1);
  auto check = first->check_when_passed([] {});
  check->order_after(*second);
  second->host_callback([&] { after.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(second->query());
  EXPECT_EQ(after.load(), 0) << "the second stream went past a point the first had not reached";
  std::atomic_ref<std::uint32_t>(*flag).store(1);
  second->synchronize();
  EXPECT_EQ(after.load(), 1);

  first->synchronize();  // the check runs; its event goes back to the stream
  EXPECT_TRUE(check->has_run());
  first->wait_value(flag, 2);
  first->check_when_passed([] {});  // takes that event, recorded behind the new wait
  check->order_after(*second);
  second->host_callback([&] { after.fetch_add(1); });
  second->synchronize();
  EXPECT_EQ(after.load(), 2) << "the second stream waited for a later point of the first";
  EXPECT_FALSE(first->query());
  std::atomic_ref<std::uint32_t>(*flag).store(2);
  first->synchronize();

  // A check given up before its stream got there orders nothing: an error, not a stream that runs ahead of it.
  first->wait_value(flag, 3);
  auto given_up = first->check_when_passed([] {});
  given_up->settle(Deadline::after_seconds(0.05), "rank 0: allreduce of 4 bytes: given up");
  try {
    given_up->order_after(*second);
    FAIL() << "ordered after a point that was given up";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("given up"), std::string::npos) << e.what();
  }
  std::atomic_ref<std::uint32_t>(*flag).store(3);
  EXPECT_THROW(first->synchronize(), TimeoutError);  // the given-up check's error, once
  first->synchronize();
  second->synchronize();
}

TEST(HostStream, SynchronizeOnAnUnsatisfiedWaitTimesOut) {
  ScopedTimeout timeout("1");
  auto memory = allocate(MemoryKind::Host, 64);
  auto* flag = static_cast<std::uint32_t*>(memory->data());
  *flag = 3;
  auto stream = make_stream(MemoryKind::Host);
  int ran = 0;
  stream->wait_value(flag, 5);
  stream->host_callback([&] { ran = 1; });
  EXPECT_FALSE(stream->query());
  Stopwatch watch;
  try {
    stream->synchronize();
    FAIL() << "synchronize returned on a wait that cannot be satisfied";
  } catch (const TimeoutError& e) {
    std::string text = e.what();
    EXPECT_NE(text.find("still busy after 1 s"), std::string::npos) << text;
    EXPECT_NE(text.find("wait_value"), std::string::npos) << text;
    EXPECT_NE(text.find("for >= 5"), std::string::npos) << text;
    EXPECT_NE(text.find("reads 3"), std::string::npos) << text;
  }
  EXPECT_GE(watch.seconds(), 0.9);
  EXPECT_LT(watch.seconds(), 3.0);
  EXPECT_EQ(ran, 0);
  // The stream is still usable: releasing the flag lets it finish.
  std::atomic_ref<std::uint32_t>(*flag).store(5, std::memory_order_release);
  stream->synchronize();
  EXPECT_EQ(ran, 1);
}

TEST(HostStream, WaitValueComparesLikeCudaGeq) {
  using host::flag_reached;
  EXPECT_TRUE(flag_reached(5, 5));
  EXPECT_TRUE(flag_reached(6, 5));
  EXPECT_FALSE(flag_reached(4, 5));
  EXPECT_TRUE(flag_reached(2, 0xfffffffeu));   // the counter wrapped: 2 is 4 past 0xfffffffe
  EXPECT_FALSE(flag_reached(0xfffffffeu, 2));
  auto memory = allocate(MemoryKind::Host, 64);
  auto* flag = static_cast<std::uint32_t*>(memory->data());
  *flag = 2;
  auto stream = make_stream(MemoryKind::Host);
  stream->wait_value(flag, 0xfffffffeu);
  stream->synchronize_until(Deadline(std::chrono::seconds(5)));
}

TEST(HostStream, BadFlagAddressesAreRejected) {
  auto stream = make_stream(MemoryKind::Host);
  alignas(8) std::uint32_t words[2] = {0, 0};
  auto* misaligned = reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(words) + 1);
  EXPECT_THROW(stream->write_value(misaligned, 1), InvalidArgument);
  EXPECT_THROW(stream->wait_value(nullptr, 1), InvalidArgument);
  EXPECT_THROW(stream->copy(nullptr, words, 4), InvalidArgument);
  EXPECT_THROW(stream->host_callback({}), InvalidArgument);
  stream->copy(nullptr, nullptr, 0);  // nothing to do is fine
  EXPECT_TRUE(stream->query());
}

TEST(HostStream, DestroyingDrainsCopiesAndWrites) {
  std::vector<unsigned char> source = pattern(1 << 20, 9), target(1 << 20, 0);
  std::uint32_t flag = 0;
  {
    auto stream = make_stream(MemoryKind::Host);
    stream->copy(target.data(), source.data(), source.size());
    stream->write_value(&flag, 7);
  }
  EXPECT_EQ(target, source);
  EXPECT_EQ(flag, 7u);
}

TEST(HostStream, DestroyingAbandonsAStuckWaitWithinItsGrace) {
  std::uint32_t flag = 0;
  int ran = 0;
  Stopwatch watch;
  {
    auto stream = make_stream(MemoryKind::Host);
    stream->wait_value(&flag, 1);
    stream->host_callback([&] { ran = 1; });
  }
  EXPECT_LT(watch.seconds(), 3.0);
  EXPECT_EQ(ran, 0);  // what follows an abandoned wait must not run: it would break the stream's order
}

/// Queues `count` operations made by `queue_one` on a thread behind a closed wait, and returns how many went in before
/// the queuing thread was held: once `expected` went in (or 30 s passed: a slow machine must not fail it), 300 ms more
/// for any that would still go in. Then it opens the wait; the rest goes in and runs.
template <class QueueOne>
int queued_before_held(Stream& stream, int count, int expected, QueueOne&& queue_one) {
  std::uint32_t gate = 0;
  stream.wait_value(&gate, 1);
  std::atomic<int> queued{0};
  std::thread filler([&] {
    for (int i = 0; i < count; ++i) {
      queue_one(i);
      queued.fetch_add(1);
    }
  });
  poll_for_seconds(30, [&] { return queued.load() >= expected; });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int held_at = queued.load();
  std::atomic_ref<std::uint32_t>(gate).store(1, std::memory_order_release);
  filler.join();
  stream.synchronize();
  return held_at;
}

// As on CUDA, a full queue makes the caller wait until the stream has run some of it (PICKLE_HOST_STREAM_DEPTH,
// 1024 by default; a callback counts two): the CPU tests then hang where a GPU would.
TEST(HostStream, AFullQueueHoldsTheCallerUntilTheStreamMoves) {
  unsetenv("PICKLE_HOST_STREAM_DEPTH");  // the default: a stream reads it when it is made
  auto stream = make_stream(MemoryKind::Host);
  std::vector<std::uint32_t> words(3000, 0);
  const int writes = queued_before_held(*stream, 3000, 1024, [&](int i) {
    stream->write_value(&words[static_cast<std::size_t>(i)], static_cast<std::uint32_t>(i + 1));
  });
  EXPECT_EQ(writes, 1024);
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(words[static_cast<std::size_t>(i)], static_cast<std::uint32_t>(i + 1));

  std::vector<int> ran;
  const int callbacks =
      queued_before_held(*stream, 1500, 512, [&](int i) { stream->host_callback([&, i] { ran.push_back(i); }); });
  EXPECT_EQ(callbacks, 512);
  ASSERT_EQ(ran.size(), 1500u);
  for (int i = 0; i < 1500; ++i) ASSERT_EQ(ran[static_cast<std::size_t>(i)], i);
}

// A callback that queues on its own stream would wait for itself: the stream's own thread is never held.
TEST(HostStream, ACallbackQueuingOnItsOwnFullStreamIsNotHeld) {
  ScopedTimeout timeout("5");  // a held callback fails the synchronize soon
  setenv("PICKLE_HOST_STREAM_DEPTH", "16", 1);
  auto stream = make_stream(MemoryKind::Host);
  unsetenv("PICKLE_HOST_STREAM_DEPTH");
  std::vector<std::uint32_t> words(2000, 0);
  stream->host_callback([&] {
    for (std::size_t i = 0; i < words.size(); ++i) stream->write_value(&words[i], 1);
  });
  stream->synchronize();
  for (std::size_t i = 0; i < words.size(); ++i) ASSERT_EQ(words[i], 1u) << i;
}

// A stream destroyed while stuck drops what it queued behind its wait, records included. A stream waiting for one
// of those records gives its wait up (an error at its synchronize, what followed the wait dropped) instead of
// waiting for ever, which held up whoever then queued on it once its queue was full.
TEST(HostStream, AWaitForARecordThatADestroyedStreamDroppedGivesUp) {
  ScopedTimeout timeout("10");  // were the wait kept, the synchronize would time out instead
  std::uint32_t never = 0;
  auto event = make_event(MemoryKind::Host);
  auto waiting = make_stream(MemoryKind::Host);
  int ran = 0;
  {
    auto stuck = make_stream(MemoryKind::Host);
    stuck->wait_value(&never, 1);
    stuck->record(*event);
    waiting->wait(*event);
    waiting->host_callback([&] { ran = 1; });
  }
  // Queued after the give-up, one operation at a time as a send's copy and completion are: refused, until the error
  // is reported (the give-up happens within the destroyed stream's grace).
  ASSERT_TRUE(poll_for_seconds(5, [&] { return waiting->idle_now(); }));
  std::uint32_t word = 0;
  EXPECT_THROW(waiting->write_value(&word, 7), Error);
  EXPECT_THROW(waiting->host_callback([&] { ran = 3; }), Error);
  EXPECT_THROW(event->query(), Error);  // the host hears that its record will never be reached
  try {
    waiting->synchronize();
    ADD_FAILURE() << "the wait for the dropped record passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("record was dropped"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ran, 0);  // what followed the wait must not run: the awaited work never happened
  EXPECT_EQ(word, 0u);
  EXPECT_THROW(event->synchronize(), Error);  // the host's wait for it gives up at once too
  waiting->host_callback([&] { ran = 2; });  // reported: the stream goes on
  waiting->synchronize();
  EXPECT_EQ(ran, 2);
}

// Only the wait for the dropped record itself gives up: a wait for an earlier record of the same event, still on its
// way on a live stream, passes once that stream reaches it.
TEST(HostStream, ARecordDroppedLaterDoesNotFailAWaitForAnEarlierOne) {
  ScopedTimeout timeout("10");
  std::uint32_t gate = 0, never = 0;
  auto event = make_event(MemoryKind::Host);
  auto live = make_stream(MemoryKind::Host);
  auto waiting = make_stream(MemoryKind::Host);
  int ran = 0;
  live->wait_value(&gate, 1);
  live->record(*event);    // record 1
  waiting->wait(*event);   // for record 1
  waiting->host_callback([&] { ran = 1; });
  {
    auto stuck = make_stream(MemoryKind::Host);
    stuck->wait_value(&never, 1);
    stuck->record(*event);  // record 2, dropped
  }
  std::atomic_ref<std::uint32_t>(gate).store(1, std::memory_order_release);
  waiting->synchronize();
  EXPECT_EQ(ran, 1);
}

TEST(HostEvent, TimesWorkAndOrdersStreams) {
  auto a = make_stream(MemoryKind::Host);
  auto b = make_stream(MemoryKind::Host);
  auto start = make_event(MemoryKind::Host);
  auto end = make_event(MemoryKind::Host);
  EXPECT_TRUE(end->query());  // never recorded
  EXPECT_THROW(end->elapsed_ms(*start), InvalidArgument);

  int value = 0;
  int seen_by_b = -1;
  a->record(*start);
  a->host_callback([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = 42;
  });
  a->record(*end);
  b->wait(*end);
  b->host_callback([&] { seen_by_b = value; });
  b->synchronize();
  EXPECT_EQ(seen_by_b, 42);
  end->synchronize();
  EXPECT_TRUE(end->query());
  float ms = end->elapsed_ms(*start);
  EXPECT_GE(ms, 45.0f);
  EXPECT_LT(ms, 2000.0f);
}

TEST(HostEvent, SynchronizeIsBounded) {
  ScopedTimeout timeout("1");
  std::uint32_t flag = 0;
  auto stream = make_stream(MemoryKind::Host);
  auto event = make_event(MemoryKind::Host);
  stream->wait_value(&flag, 1);
  stream->record(*event);
  EXPECT_FALSE(event->query());
  EXPECT_THROW(event->synchronize(), TimeoutError);
  std::atomic_ref<std::uint32_t>(flag).store(1, std::memory_order_release);
  event->synchronize();
  EXPECT_TRUE(event->query());
}

}  // namespace
}  // namespace pickle::device
