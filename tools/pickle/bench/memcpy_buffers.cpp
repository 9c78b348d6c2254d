#include "memcpy_buffers.hpp"

#include <algorithm>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/log.hpp"
#include "pattern.hpp"

namespace pickle::bench {
namespace {

constexpr std::size_t kStagingBytes = std::size_t{64} << 20;
/// CUDA's out-of-memory code, the same number for the runtime and the driver.
constexpr int kCudaOutOfMemory = 2;

}  // namespace

std::unique_ptr<device::Allocation> allocate_up_to(MemoryKind kind, std::size_t bytes, std::size_t floor, int device,
                                                   device::AllocMethod method) {
  while (true) {
    try {
      return device::allocate(kind, bytes, device, method);
    } catch (const CudaError& e) {
      if (e.cuda_code() != kCudaOutOfMemory || bytes / 2 < floor) throw;
      PICKLE_LOG(Info, "bench", human_bytes(bytes) << " do not fit on GPU " << device << ": trying half");
      bytes /= 2;
    }
  }
}

void fill_pattern(device::Stream& stream, void* dst, std::size_t bytes, int rank) {
  std::vector<std::uint8_t> staging(std::min(bytes, kStagingBytes));
  auto* out = static_cast<std::uint8_t*>(dst);
  for (std::size_t done = 0; done < bytes;) {
    std::size_t chunk = std::min(staging.size(), bytes - done);
    fill_source(rank, done, staging.data(), chunk);
    stream.copy(out + done, staging.data(), chunk);
    stream.synchronize();  // the staging buffer is refilled next
    done += chunk;
  }
}

void poison(device::Stream& stream, void* dst, std::size_t bytes) {
  // One small upload, then the buffer doubles itself: device-speed copies, no buffer-sized host memory.
  std::vector<std::uint8_t> seed(std::min(bytes, std::size_t{1} << 20), kPoisonByte);
  auto* out = static_cast<std::uint8_t*>(dst);
  std::size_t done = seed.size();
  stream.copy(out, seed.data(), done);
  while (done < bytes) {
    std::size_t chunk = std::min(done, bytes - done);
    stream.copy(out + done, out, chunk);
    done += chunk;
  }
  stream.synchronize();  // `seed` goes away on return
}

std::uint64_t count_wrong_at(device::Stream& stream, const void* src, std::size_t bytes, int sender,
                             std::uint64_t first) {
  std::vector<std::uint8_t> staging(std::min(bytes, kStagingBytes));
  const auto* in = static_cast<const std::uint8_t*>(src);
  std::uint64_t wrong = 0;
  for (std::size_t done = 0; done < bytes;) {
    std::size_t chunk = std::min(staging.size(), bytes - done);
    stream.copy(staging.data(), in + done, chunk);
    stream.synchronize();
    wrong += count_wrong(staging.data(), chunk, sender, first + done);
    done += chunk;
  }
  return wrong;
}

}  // namespace pickle::bench
