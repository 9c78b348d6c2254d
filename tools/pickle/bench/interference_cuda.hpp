#pragma once
// CUDA runtime helpers of `pickle bench interference`: every failed call becomes a CudaError that says what was being
// done, every device allocation, stream and event is an RAII handle, and every wait for the GPU is bounded.

#include <cstddef>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/clock.hpp"

namespace pickle::bench::cuda {

/// Throws CudaError "<what>: <call> failed: <name> (<description>)" unless `status` is cudaSuccess.
void check(cudaError_t status, const char* call, const std::string& what);

/// Device memory from cudaMalloc, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` on the current device; CudaError (cudaErrorMemoryAllocation when it does not fit) naming `what`.
  DeviceBuffer(std::size_t bytes, const std::string& what);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }
  template <class T>
  T* as() const noexcept {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A non-blocking stream (it does not wait for the legacy default stream) on the current device.
class StreamHandle {
 public:
  explicit StreamHandle(const std::string& what);
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  ~StreamHandle();
  cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// An event; `timing` false makes it cheaper (cudaEventDisableTiming) for completion tracking only.
class EventHandle {
 public:
  EventHandle(bool timing, const std::string& what);
  EventHandle(EventHandle&& other) noexcept;
  EventHandle& operator=(EventHandle&&) = delete;
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  ~EventHandle();
  cudaEvent_t get() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Completion of work enqueued in order on one stream: an event recorded after each piece, checked oldest first.
/// Events are reused once retired, so that a ring of in-flight work allocates only while it grows.
class EventQueue {
 public:
  explicit EventQueue(std::string what) : what_(std::move(what)) {}
  /// Records an event after the work enqueued on `stream` so far.
  void record(cudaStream_t stream);
  /// Whether the oldest recorded event not yet retired has completed (false when none is pending).
  bool oldest_done();
  void retire_oldest();
  std::size_t pending() const noexcept { return pending_.size(); }

 private:
  std::string what_;
  std::deque<EventHandle> pending_;
  std::vector<EventHandle> spare_;
};

/// True once the work before `event`'s last record completed; CudaError (naming `what`) on a failure.
bool event_done(cudaEvent_t event, const std::string& what);
/// Waits (polling, so that the host's clock reads the moment closely) until `event` completes; TimeoutError naming
/// `what` once `deadline` passes.
void wait_event(cudaEvent_t event, const Deadline& deadline, const std::string& what);
/// Records an event on `stream` and waits for it as above: the stream's work so far is done when this returns.
void wait_stream(cudaStream_t stream, const Deadline& deadline, const std::string& what);

/// Bytes free on the current device (cudaMemGetInfo).
std::size_t free_memory(const std::string& what);

}  // namespace pickle::bench::cuda
