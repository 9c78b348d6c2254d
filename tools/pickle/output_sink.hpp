#pragma once
// Where the launcher's forwarded output goes: fd 1 or 2, written by a thread of its own, so that a reader who stops
// reading (a pager the user paused, a full pipe) blocks that thread and never the launcher's event loop, which must
// keep handling signals and rank exits. Bounded: past kHighWater queued bytes the event loop stops reading the
// ranks' pipes, so the ranks block on their own writes, as in a shell pipeline.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/clock.hpp"

namespace pickle::launch {

class OutputSink {
 public:
  /// Queued bytes above which backlogged() is true.
  static constexpr std::size_t kHighWater = std::size_t{4} << 20;
  static constexpr auto kLastFlush = std::chrono::seconds(1);

  explicit OutputSink(int fd);
  /// Waits up to kLastFlush for queued output, then stops the writer and drops the rest (call flush first to wait
  /// longer). A writer blocked in write() is left to the process's exit.
  ~OutputSink();
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  /// Queues `data`, written after everything queued before it, in whole pieces: chunks of whole lines never
  /// interleave. Never blocks. Dropped once the sink is broken.
  void write(std::string data);
  /// More than kHighWater bytes wait: stop reading what would be written here.
  bool backlogged() const;
  /// A write failed (EPIPE: the reader is gone); nothing more will be written.
  bool broken() const;
  /// Waits until everything queued is written (or the sink broke); false when `deadline` passed first.
  bool flush(const Deadline& deadline);
  /// The reader is not coming back: the destructor drops what is queued without waiting kLastFlush.
  void give_up();

 private:
  // Shared with the writer thread, which may outlive the sink while blocked in write() (see the destructor).
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<std::string> queue;
    std::size_t queued_bytes = 0;  // includes the piece being written
    bool writing = false;
    bool broken = false;
    bool stopping = false;
    bool given_up = false;
  };
  static void writer(int fd, std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace pickle::launch
