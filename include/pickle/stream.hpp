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
  /// Waits for all work enqueued so far, for at most PICKLE_TIMEOUT (TimeoutError after that, never a hang). Then
  /// throws the failure of an operation this stream waited for and has passed (Request::on_stream, a signal wait,
  /// a collective): the first one found; the stream goes on.
  void synchronize();
  /// True when all enqueued work has completed; throws as synchronize() does for what the stream has passed.
  bool query();
  /// The cudaStream_t of a CUDA stream, nullptr for host streams. Synchronizing it directly (cudaStreamSynchronize)
  /// waits as well, but reports none of the failures above: ask this Stream.
  void* native_handle() const noexcept;

  /// For pickle's own layers: the device-layer stream behind this handle.
  device::Stream& impl() const noexcept { return *impl_; }
  explicit Stream(std::shared_ptr<device::Stream> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<device::Stream> impl_;
};

}  // namespace pickle
