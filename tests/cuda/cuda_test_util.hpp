#pragma once
// Helpers of the GPU tests: pinned host buffers and the position-dependent pattern (64-bit words = index * golden +
// seed), filled and checked on the host.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace pickle::test {

inline constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;

inline void cuda_ok(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

/// Waits until what a test set up through the legacy stream (cudaMemset, the tail of a cudaMemcpy from pageable
/// memory) has landed: a kernel launched next on a non-blocking stream does not wait for that stream.
inline void wait_for_legacy_stream() {
  cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize(cudaStreamLegacy)");
}

/// Page-locked host memory, so that copies to and from it stay asynchronous on the stream.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t bytes) : bytes_(bytes) { cuda_ok(cudaMallocHost(&data_, bytes), "cudaMallocHost"); }
  ~PinnedBuffer() { cudaFreeHost(data_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return data_; }
  std::uint64_t* words() const { return static_cast<std::uint64_t*>(data_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

inline void fill_pattern(std::uint64_t* words, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = 0; i < count; ++i) words[i] = i * kGolden + seed;
}

/// Index of the first word that differs from the pattern, or count when all match.
inline std::size_t first_wrong_word(const std::uint64_t* words, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = 0; i < count; ++i) {
    if (words[i] != i * kGolden + seed) return i;
  }
  return count;
}

}  // namespace pickle::test
