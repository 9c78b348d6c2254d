#include "interference_cuda.hpp"

#include <thread>
#include <utility>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench::cuda {

void check(cudaError_t status, const char* call, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // leave no sticky "last error" behind for the next launch's check
  throw CudaError(cat(what, ": ", call, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")"),
                  static_cast<int>(status));
}

DeviceBuffer::DeviceBuffer(std::size_t bytes, const std::string& what) : bytes_(bytes) {
  check(cudaMalloc(&data_, bytes), "cudaMalloc", cat(what, " (", human_bytes(bytes), ")"));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

StreamHandle::StreamHandle(const std::string& what) {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", what);
}

StreamHandle::~StreamHandle() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

EventHandle::EventHandle(bool timing, const std::string& what) {
  check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags", what);
}

EventHandle::EventHandle(EventHandle&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

EventHandle::~EventHandle() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void EventQueue::record(cudaStream_t stream) {
  if (spare_.empty()) {
    pending_.emplace_back(false, what_);
  } else {
    pending_.push_back(std::move(spare_.back()));
    spare_.pop_back();
  }
  check(cudaEventRecord(pending_.back().get(), stream), "cudaEventRecord", what_);
}

bool EventQueue::oldest_done() { return !pending_.empty() && event_done(pending_.front().get(), what_); }

void EventQueue::retire_oldest() {
  if (pending_.empty()) return;
  spare_.push_back(std::move(pending_.front()));
  pending_.pop_front();
}

bool event_done(cudaEvent_t event, const std::string& what) {
  cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery", what);
  return true;
}

void wait_event(cudaEvent_t event, const Deadline& deadline, const std::string& what) {
  int polls = 0;
  while (!event_done(event, what)) {
    if (deadline.expired()) {
      throw TimeoutError(cat(what, ": the GPU work did not finish within ", deadline.timeout().count() / 1000.0,
                             " s (PICKLE_TIMEOUT)"));
    }
    // Spin briefly, then yield: the completion time is read right after this returns.
    if (++polls > 1000) std::this_thread::yield();
  }
}

void wait_stream(cudaStream_t stream, const Deadline& deadline, const std::string& what) {
  EventHandle done(false, what);
  check(cudaEventRecord(done.get(), stream), "cudaEventRecord", what);
  wait_event(done.get(), deadline, what);
}

std::size_t free_memory(const std::string& what) {
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", what);
  return free;
}

}  // namespace pickle::bench::cuda
