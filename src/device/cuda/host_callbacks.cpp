#include "device/cuda/host_callbacks.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "device/cuda/driver_api.hpp"
#include "device/host/backoff.hpp"

namespace pickle::device::cuda {

class CallbackChannel {
 public:
  explicit CallbackChannel(std::uint32_t* pair) : words(pair) {}

  struct Entry {
    std::uint32_t count;
    std::function<void()> fn;
    std::shared_ptr<CallbackErrors> errors;
  };
  // words[0]: the count the stream reached (written by the GPU); words[1]: the count whose callback returned
  // (written by the callback thread). A pair keeps its counts from one stream to the next, so that a count a stream
  // is still to write is never one the next stream waits for.
  std::uint32_t* words;
  std::uint32_t issued = 0;  // guarded by the runner's mutex
  std::deque<Entry> queue;   // guarded by the runner's mutex
  bool open = true;          // guarded by the runner's mutex
};

namespace {

std::uint32_t load(const std::uint32_t* word) {
  return std::atomic_ref<const std::uint32_t>(*word).load(std::memory_order_acquire);
}

/// The process's callback thread and its pool of word pairs. Never destroyed: streams (and their pending callbacks)
/// may outlive every static object.
class Runner {
 public:
  static Runner& instance() {
    static Runner* runner = new Runner;
    return *runner;
  }

  std::shared_ptr<CallbackChannel> open(int device) {
    std::uint32_t* words = take_words(device);
    auto channel = std::make_shared<CallbackChannel>(words);
    std::lock_guard lock(mutex_);
    channel->issued = load(&words[1]);
    return channel;
  }

  CallbackTicket submit(const std::shared_ptr<CallbackChannel>& channel, std::function<void()> fn,
                        std::shared_ptr<CallbackErrors> errors) {
    std::lock_guard lock(mutex_);
    if (!thread_started_) {
      std::thread([this] { run(); }).detach();
      thread_started_ = true;
    }
    const std::uint32_t count = ++channel->issued;
    if (channel->queue.empty()) active_.push_back(channel);
    channel->queue.push_back({count, std::move(fn), std::move(errors)});
    ++submitted_;
    wake_.notify_one();
    return CallbackTicket{&channel->words[0], &channel->words[1], count};
  }

  void close(const std::shared_ptr<CallbackChannel>& channel) noexcept {
    std::lock_guard lock(mutex_);
    channel->open = false;
    if (channel->queue.empty()) free_words_.push_back(channel->words);
  }

 private:
  Runner() = default;

  /// A word pair from the pool, or a new slab of pairs (cudaHostAlloc, on the caller's thread: the callback
  /// thread never calls CUDA).
  std::uint32_t* take_words(int device) {
    {
      std::lock_guard lock(mutex_);
      if (!free_words_.empty()) {
        std::uint32_t* words = free_words_.back();
        free_words_.pop_back();
        return words;
      }
    }
    constexpr std::size_t kPairs = 256;
    void* slab = nullptr;
    {
      DeviceGuard guard(device);
      PICKLE_CUDA((OpContext{.op = "allocate the words of CUDA host callbacks", .bytes = kPairs * 8}),
                  cudaHostAlloc(&slab, kPairs * 2 * sizeof(std::uint32_t), cudaHostAllocPortable | cudaHostAllocMapped));
    }
    auto* words = static_cast<std::uint32_t*>(slab);
    for (std::size_t i = 0; i < kPairs * 2; ++i) words[i] = 0;
    std::lock_guard lock(mutex_);
    for (std::size_t pair = 1; pair < kPairs; ++pair) free_words_.push_back(words + 2 * pair);
    return words;
  }

  /// Polls the channels that have callbacks queued: spins while work is coming in, then yields, then sleeps in
  /// short steps (at most 50 us: the stream waits that long at worst); blocks when nothing is queued.
  void run() {
    std::unique_lock lock(mutex_);
    int idle_polls = 0;
    for (;;) {
      wake_.wait(lock, [&] { return !active_.empty(); });
      const std::uint64_t submitted_before = submitted_;
      bool ran = false;
      for (std::size_t i = 0; i < active_.size();) {
        // Only this thread removes channels from active_ (others append), so index i stays this channel's.
        std::shared_ptr<CallbackChannel> channel = active_[i];
        CallbackChannel::Entry& front = channel->queue.front();
        if (!host::flag_reached(load(&channel->words[0]), front.count)) {
          ++i;
          continue;
        }
        // The entry stays queued while its function runs: a submit meanwhile finds the queue busy and does not
        // list the channel in active_ a second time.
        const std::uint32_t count = front.count;
        std::function<void()> fn = std::move(front.fn);
        std::shared_ptr<CallbackErrors> errors = std::move(front.errors);
        lock.unlock();
        try {
          fn();
        } catch (...) {
          std::lock_guard errors_lock(errors->mutex);
          if (!errors->first) errors->first = std::current_exception();
        }
        fn = nullptr;  // what fn captured goes before the stream goes on, as after a host function
        std::atomic_ref<std::uint32_t>(channel->words[1]).store(count, std::memory_order_release);
        lock.lock();
        channel->queue.pop_front();
        ran = true;
        if (channel->queue.empty()) {
          active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
          if (!channel->open) free_words_.push_back(channel->words);
        }
      }
      if (ran || submitted_ != submitted_before) {
        idle_polls = 0;
        continue;
      }
      lock.unlock();
      ++idle_polls;
      if (idle_polls < 2000) {
        host::cpu_relax();
      } else if (idle_polls < 2200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(idle_polls < 3000 ? 10 : 50));
      }
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool thread_started_ = false;
  std::uint64_t submitted_ = 0;
  std::vector<std::shared_ptr<CallbackChannel>> active_;  // channels with queued callbacks, oldest first
  std::vector<std::uint32_t*> free_words_;
};

}  // namespace

std::shared_ptr<CallbackChannel> open_callback_channel(int device) { return Runner::instance().open(device); }

CallbackTicket submit_callback(const std::shared_ptr<CallbackChannel>& channel, std::function<void()> fn,
                               std::shared_ptr<CallbackErrors> errors) {
  return Runner::instance().submit(channel, std::move(fn), std::move(errors));
}

void close_callback_channel(const std::shared_ptr<CallbackChannel>& channel) noexcept {
  Runner::instance().close(channel);
}

}  // namespace pickle::device::cuda
