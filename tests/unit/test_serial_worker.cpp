// core/serial_worker: jobs run one at a time in the order posted, a throwing job does not stop the next, drain is
// bounded, destruction drops what has not started, and stop() drops what a running job posts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/serial_worker.hpp"

namespace pickle {
namespace {

/// Waits until `flag` is set, for up to 10 s (a loaded machine may start the worker's thread late).
bool becomes_true(const std::atomic<bool>& flag) {
  const Deadline limit = Deadline::after_seconds(10);
  while (!flag.load() && !limit.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return flag.load();
}

/// A thread that sets `flag` 50 ms from now.
std::thread set_soon(std::atomic<bool>& flag) {
  return std::thread([&flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flag = true;
  });
}

/// A job that says it started and then holds the worker until `release` is set.
void hold_until(std::atomic<bool>& started, const std::atomic<bool>& release) {
  started = true;
  while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(SerialWorker, RunsJobsInOrderOneAtATime) {
  SerialWorker worker("test");
  std::vector<int> order;  // touched by the worker only, read after drain
  std::atomic<int> running{0}, most{0};
  for (int i = 0; i < 200; ++i) {
    worker.post([&, i] {
      int now = ++running;
      most = std::max(most.load(), now);
      order.push_back(i);
      --running;
    });
  }
  ASSERT_TRUE(worker.drain(Deadline::after_seconds(10)));
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(most.load(), 1);
}

TEST(SerialWorker, AThrowingJobDoesNotStopTheNext) {
  SerialWorker worker("test");
  std::atomic<bool> ran{false};
  worker.post([] { throw std::runtime_error("a job failed"); });
  worker.post([&] { ran = true; });
  ASSERT_TRUE(worker.drain(Deadline::after_seconds(10)));
  EXPECT_TRUE(ran.load());
}

TEST(SerialWorker, DrainIsBoundedAndDestructionDropsWhatHasNotStarted) {
  std::atomic<bool> started{false}, release{false}, second{false};
  std::thread releaser;
  {
    SerialWorker worker("test");
    worker.post([&] { hold_until(started, release); });
    worker.post([&] { second = true; });
    // The first job must be running before the destructor, or it is dropped too.
    ASSERT_TRUE(becomes_true(started));
    EXPECT_FALSE(worker.drain(Deadline::after_seconds(0.05)));  // the first job is still running
    releaser = set_soon(release);
  }  // the destructor waits for the running job, then drops the queued one
  releaser.join();
  EXPECT_TRUE(release.load());
  EXPECT_FALSE(second.load());
}

// A job running while the owner stops the worker may post (the communicator's raise jobs re-post themselves): stop()
// waits for it, drops what it posted, and the worker takes nothing after.
TEST(SerialWorker, StopWaitsForTheRunningJobAndDropsWhatItPosts) {
  SerialWorker worker("test");
  std::atomic<bool> started{false}, release{false}, posted_ran{false}, late_ran{false};
  worker.post([&] {
    hold_until(started, release);
    worker.post([&] { posted_ran = true; });
  });
  ASSERT_TRUE(becomes_true(started));
  std::thread releaser = set_soon(release);
  worker.stop();  // returns once the running job has posted and ended
  releaser.join();
  EXPECT_FALSE(posted_ran.load());
  worker.post([&] { late_ran = true; });
  EXPECT_TRUE(worker.idle());  // nothing was taken
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(late_ran.load());
}

}  // namespace
}  // namespace pickle
