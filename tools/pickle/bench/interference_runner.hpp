#pragma once
// Keeps a background Traffic busy from a thread of its own: `depth` messages in flight at all times (a ring, so
// that the link never idles between messages), the host's monotonic clock read as each one completes. Stopping is
// agreed between the two ranks so that every send meets a receive: halt() freezes this side's count of posted
// messages, the ranks exchange their counts, and drain() posts up to the larger one and waits for everything.
// A post may block until the peer makes the matching call (a collective's rendezvous), so halt() never waits for
// the thread: a post counts as made from the moment the thread commits to it, under a lock that halt() takes too.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "interference_traffic.hpp"

namespace pickle::bench {

class TrafficRunner {
 public:
  /// Messages of `bytes` from `send` / into `recv`; `device` is made current on the thread (-1: none, for traffic that
  /// needs no GPU, as in the tests); `what` names rank, peer
  /// and operation for errors; a message that does not complete within `timeout_seconds` fails the runner.
  TrafficRunner(Traffic& traffic, const void* send, void* recv, std::size_t bytes, int depth, int device,
                std::string what, double timeout_seconds);
  /// Stops the thread without waiting for any message (abort), then joins it.
  ~TrafficRunner();
  TrafficRunner(const TrafficRunner&) = delete;
  TrafficRunner& operator=(const TrafficRunner&) = delete;

  /// Starts the thread.
  void start();
  /// Messages completed so far, and the host time of the first completion (0 before it).
  std::uint64_t completed() const noexcept { return completed_.load(std::memory_order_acquire); }
  std::int64_t first_completion_ns() const noexcept { return first_ns_.load(std::memory_order_acquire); }
  /// Rethrows the thread's error, if it failed.
  void rethrow_failure();

  /// Stops posting new messages and returns how many this side has posted or is posting, in all. Does not block.
  std::uint64_t halt();
  /// Posts messages until `target` were posted in all, waits until every one completed and joins the thread
  /// (bounded by `deadline`, and by the per-message timeout). Rethrows the thread's error.
  void drain(std::uint64_t target, const Deadline& deadline);
  /// The completion times (host monotonic ns), in order; complete once drain() returned.
  const std::vector<std::int64_t>& completions() const noexcept { return completions_; }

 private:
  void loop();
  void stop_and_join() noexcept;

  Traffic& traffic_;
  const void* send_;
  void* recv_;
  std::size_t bytes_;
  std::uint64_t depth_;
  int device_;
  std::string what_;
  double timeout_seconds_;

  std::thread thread_;
  std::atomic<bool> abort_{false};
  std::atomic<bool> finished_{false};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::int64_t> first_ns_{0};
  std::vector<std::int64_t> completions_;  // written by the thread only; read once it is joined

  /// Under post_mutex_: the thread's decision to post, and halt()/drain() changing what it may post.
  bool commit_post();
  std::mutex post_mutex_;
  std::uint64_t posted_ = 0;     // posts committed to (made or in progress)
  bool halt_requested_ = false;  // no new posts until the target is known
  std::optional<std::uint64_t> target_;

  std::mutex failure_mutex_;
  std::exception_ptr failure_;
};

}  // namespace pickle::bench
