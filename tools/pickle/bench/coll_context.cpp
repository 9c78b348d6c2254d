#include "coll_context.hpp"

#include <algorithm>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "parallel_parts.hpp"

namespace pickle::bench {
namespace {

/// CUDA's out-of-memory code, the same number for the runtime (cudaErrorMemoryAllocation) and the driver
/// (CUDA_ERROR_OUT_OF_MEMORY).
constexpr int kCudaOutOfMemory = 2;

}  // namespace

CollContext::CollContext(Store& store, MemoryKind kind, int device)
    : store_(&store),
      rank_(store.self().rank),
      world_size_(store.self().world_size),
      kind_(kind),
      device_(device),
      corrupt_(env::get_bool("PICKLE_BENCH_CORRUPT")),
      check_threads_(check_threads(store.self().local_world_size)) {
  stream_ = device::make_stream(kind_, device_);
  start_ = device::make_event(kind_, device_);
  stop_ = device::make_event(kind_, device_);
  poison_.assign(std::size_t{1} << 20, std::byte{kCollPoisonByte});
}

std::size_t CollContext::allocate(std::size_t bytes, std::size_t floor, int count, std::size_t extra_bytes) {
  buffers_.clear();
  extra_.reset();
  buffer_bytes_ = 0;
  // The fixed-size buffer first, so that the halving below sizes the others to what is left.
  if (extra_bytes > 0) extra_ = device::allocate(kind_, extra_bytes, device_);
  while (true) {
    try {
      for (int i = 0; i < count; ++i) buffers_.push_back(device::allocate(kind_, bytes, device_));
      buffer_bytes_ = bytes;
      return bytes;
    } catch (const CudaError& e) {
      buffers_.clear();
      if (e.cuda_code() != kCudaOutOfMemory || bytes / 2 < floor) throw;
      PICKLE_LOG(Info, "bench",
                 count << " buffers of " << human_bytes(bytes) << " do not fit on GPU " << device_ << ": trying half");
      bytes /= 2;
    }
  }
}

std::byte* CollContext::buffer(int index) const {
  const auto i = static_cast<std::size_t>(index);
  if (i == buffers_.size() && extra_) return static_cast<std::byte*>(extra_->data());
  return static_cast<std::byte*>(buffers_.at(i)->data());
}

std::vector<std::byte>& CollContext::staging(std::size_t bytes) {
  if (staging_.size() < bytes) staging_.resize(bytes);
  return staging_;
}

void CollContext::load_inputs(const CollPattern& pattern, void* dst, std::uint64_t first, std::size_t n) {
  const std::size_t size = datatype_size(pattern.type);
  auto& buffer = staging(std::min(n * size, kStagingBytes));
  const std::size_t per_chunk = buffer.size() / size;
  auto* out = static_cast<std::byte*>(dst);
  for (std::size_t done = 0; done < n;) {
    std::size_t chunk = std::min(per_chunk, n - done);
    sum_over_parts(chunk, check_threads_, kElementsPerThread, [&](std::size_t begin, std::size_t end) {
      fill_inputs(pattern, rank_, first + done + begin, end - begin, buffer.data() + begin * size);
      return std::uint64_t{0};
    });
    stream_->copy(out + done * size, buffer.data(), chunk * size);
    stream_->synchronize();  // the staging buffer is refilled next
    done += chunk;
  }
}

void CollContext::poison(void* dst, std::size_t bytes) {
  // One small upload, then the buffer doubles itself: device-speed copies, no buffer-sized host memory.
  auto* out = static_cast<std::byte*>(dst);
  std::size_t done = std::min(bytes, poison_.size());
  stream_->copy(out, poison_.data(), done);
  while (done < bytes) {
    std::size_t chunk = std::min(done, bytes - done);
    stream_->copy(out + done, out, chunk);
    done += chunk;
  }
  stream_->synchronize();
}

std::uint64_t CollContext::count_wrong(const CollPattern& pattern, const void* src, std::size_t n) {
  const std::size_t size = datatype_size(pattern.type);
  auto& buffer = staging(std::min(n * size, kStagingBytes));
  const std::size_t per_chunk = buffer.size() / size;
  const auto* in = static_cast<const std::byte*>(src);
  std::uint64_t wrong = 0;
  for (std::size_t done = 0; done < n;) {
    std::size_t chunk = std::min(per_chunk, n - done);
    stream_->copy(buffer.data(), in + done * size, chunk * size);
    stream_->synchronize();
    wrong += sum_over_parts(chunk, check_threads_, kElementsPerThread, [&](std::size_t begin, std::size_t end) {
      return count_wrong_outputs(pattern, rank_, done + begin, end - begin, buffer.data() + begin * size);
    });
    done += chunk;
  }
  return wrong;
}

}  // namespace pickle::bench
