#pragma once
// A thread that runs jobs one at a time in the order they were posted, for work that may block and must not block
// the thread that asks for it. The shm transport enqueues its stream operations from two per pair (a long message is
// thousands of stream operations, and a CUDA stream whose queue is full blocks the enqueuing thread until the stream
// drains, which waits for the peer); the communicator's progress thread hands one the control messages it sends (a
// socket whose buffer is full blocks the writer until the peer reads; two progress threads blocked writing to each
// other would never read again) and one per peer the stream work of the sends it matches (where queuing it could
// wait); a staged net receive's copies into place are queued from one.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/clock.hpp"

namespace pickle {

class SerialWorker {
 public:
  /// `name` appears in log lines about failed jobs.
  explicit SerialWorker(std::string name);
  /// stop().
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  /// Runs `job` after every job posted before it. A job that throws is logged and the next one runs. Dropped once
  /// stop() began.
  void post(std::function<void()> job);
  /// Drops jobs not yet started, waits for the one running and joins the thread. A running job may still post (and
  /// its post is dropped): the owner keeps the worker, and its pointer to it, until this returns.
  void stop();
  /// Waits until every job posted so far has run (not those posted meanwhile); false when `deadline` passed first.
  bool drain(const Deadline& deadline);
  /// True when every job posted so far has run.
  bool idle();

 private:
  void run();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  std::uint64_t posted_ = 0;    // jobs posted so far
  std::uint64_t finished_ = 0;  // jobs run (or dropped) so far: they finish in the order they were posted
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pickle
