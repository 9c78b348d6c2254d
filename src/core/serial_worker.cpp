#include "core/serial_worker.hpp"

#include <chrono>
#include <exception>

#include "core/log.hpp"

namespace pickle {

SerialWorker::SerialWorker(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  changed_.notify_all();
  thread_.join();
}

void SerialWorker::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  changed_.notify_all();
}

bool SerialWorker::drain(const Deadline& deadline) {
  std::unique_lock lock(mutex_);
  while (!jobs_.empty() || busy_) {
    if (deadline.expired()) return false;
    changed_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return true;
}

void SerialWorker::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      PICKLE_LOG(Error, "core", name_ << ": " << e.what());
    }
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace pickle
