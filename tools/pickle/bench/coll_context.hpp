#pragma once
// What one rank of `pickle bench coll` (and `pickle bench scenario`) holds for the whole run, whatever the backend:
// its buffers, the timing stream with its two events, and the host staging through which checked data is loaded
// and read back in bounded chunks.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/memory.hpp>

#include "coll_pattern.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle::bench {

class CollContext {
 public:
  /// Streams and events of `kind` on `device` (the CUDA ordinal; ignored for host memory).
  CollContext(Store& store, MemoryKind kind, int device);
  CollContext(const CollContext&) = delete;
  CollContext& operator=(const CollContext&) = delete;

  Store& store() { return *store_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  MemoryKind kind() const { return kind_; }
  int device() const { return device_; }
  /// PICKLE_BENCH_CORRUPT: the checked inputs carry one corrupted element (coll_pattern.hpp).
  bool corrupt() const { return corrupt_; }

  /// Allocates `count` buffers of `bytes` each, halving `bytes` while the GPU is out of memory (down to `floor`);
  /// returns the size obtained. With `extra_bytes`, one more buffer of that fixed size comes first (at index
  /// `count`). Replaces the buffers of an earlier call.
  std::size_t allocate(std::size_t bytes, std::size_t floor, int count, std::size_t extra_bytes = 0);
  /// Buffer `index` of the last allocate(), and its size.
  std::byte* buffer(int index) const;
  std::size_t buffer_bytes() const { return buffer_bytes_; }
  /// Frees the buffers (before the backends' communicators go, nothing of theirs refers to them).
  void free_buffers() {
    buffers_.clear();
    extra_.reset();
  }

  device::Stream& stream() { return *stream_; }
  /// The timing stream as shared ownership (pickle::Stream wraps it for the Communicator).
  const std::shared_ptr<device::Stream>& stream_handle() { return stream_; }
  device::Event& start_event() { return *start_; }
  device::Event& stop_event() { return *stop_; }

  /// Writes elements [first, first + n) of this rank's inputs for `pattern` to `dst` (device memory of this kind)
  /// and waits until they are there.
  void load_inputs(const CollPattern& pattern, void* dst, std::uint64_t first, std::size_t n);
  /// Fills `bytes` at `dst` with kCollPoisonByte and waits.
  void poison(void* dst, std::size_t bytes);
  /// Reads `n` result elements from `src` and counts those that differ from `pattern`'s expected result for this
  /// rank (elements 0 .. n-1 of the result).
  std::uint64_t count_wrong(const CollPattern& pattern, const void* src, std::size_t n);

 private:
  /// Host staging for pattern generation and read-back: bounded, whatever the buffer size.
  static constexpr std::size_t kStagingBytes = std::size_t{64} << 20;
  /// Elements below which a chunk's pattern work is not split over threads (a thread costs more than it saves).
  static constexpr std::size_t kElementsPerThread = std::size_t{1} << 18;
  std::vector<std::byte>& staging(std::size_t bytes);

  Store* store_;
  int rank_, world_size_;
  MemoryKind kind_;
  int device_;
  bool corrupt_ = false;
  int check_threads_ = 1;  ///< threads that compute inputs and expected results (parallel_parts.hpp)
  std::vector<std::unique_ptr<device::Allocation>> buffers_;
  std::unique_ptr<device::Allocation> extra_;
  std::size_t buffer_bytes_ = 0;
  std::shared_ptr<device::Stream> stream_;
  std::unique_ptr<device::Event> start_, stop_;
  std::vector<std::byte> staging_;
  std::vector<std::byte> poison_;
};

}  // namespace pickle::bench
