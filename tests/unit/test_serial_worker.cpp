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
    worker.post([&] {
      started = true;
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    worker.post([&] { second = true; });
    // The first job must be running before the destructor, or it is dropped too (a loaded machine may start the
    // worker's thread late).
    Deadline start_limit = Deadline::after_seconds(10);
    while (!started.load() && !start_limit.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(started.load());
    EXPECT_FALSE(worker.drain(Deadline::after_seconds(0.05)));  // the first job is still running
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release = true;
    });
  }  // the destructor waits for the running job, then drops the queued one
  releaser.join();
  EXPECT_TRUE(release.load());
  EXPECT_FALSE(second.load());
}

// A job running while the owner stops the worker may post (the communicator's raise jobs re-post themselves): stop()
// waits for it, drops what it posted, and the worker takes nothing after; no job runs twice.
TEST(SerialWorker, StopWaitsForTheRunningJobAndDropsWhatItPosts) {
  SerialWorker worker("test");
  std::atomic<bool> started{false}, release{false}, posted_ran{false}, late_ran{false};
  worker.post([&] {
    started = true;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    worker.post([&] { posted_ran = true; });
  });
  Deadline start_limit = Deadline::after_seconds(10);
  while (!started.load() && !start_limit.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(started.load());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release = true;
  });
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
