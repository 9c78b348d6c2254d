#include "core/serial_worker.hpp"

#include <chrono>
#include <exception>

#include "core/log.hpp"

namespace pickle {

SerialWorker::SerialWorker(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}

SerialWorker::~SerialWorker() { stop(); }

void SerialWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    finished_ += jobs_.size();
    jobs_.clear();
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SerialWorker::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
    ++posted_;
  }
  changed_.notify_all();
}

bool SerialWorker::drain(const Deadline& deadline) {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = posted_;
  while (finished_ < target) {
    if (deadline.expired()) return false;
    changed_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return true;
}

bool SerialWorker::idle() {
  std::lock_guard lock(mutex_);
  return finished_ == posted_;
}

void SerialWorker::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      PICKLE_LOG(Error, "core", name_ << ": " << e.what());
    }
    lock.lock();
    ++finished_;
    changed_.notify_all();
  }
}

}  // namespace pickle
