#pragma once
/// pickle::Stream: an ordered queue of GPU (or host) work that pickle's operations join. On CUDA it is a
/// cudaStream_t (native_handle()); on host memory a worker thread runs the same operations in order.

#include <memory>

#include <pickle/memory.hpp>

namespace pickle {

namespace device {
class Stream;
}

class Stream {
 public:
  MemoryKind kind() const noexcept;
  /// CUDA ordinal, -1 for host streams.
  int device() const noexcept;
  /// Waits for all work enqueued so far, for at most PICKLE_TIMEOUT (TimeoutError after that, never a hang).
  void synchronize();
  /// True when all enqueued work has completed.
  bool query();
  /// The cudaStream_t of a CUDA stream, nullptr for host streams.
  void* native_handle() const noexcept;

  /// For pickle's own layers: the device-layer stream behind this handle.
  device::Stream& impl() const noexcept { return *impl_; }
  explicit Stream(std::shared_ptr<device::Stream> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<device::Stream> impl_;
};

}  // namespace pickle
