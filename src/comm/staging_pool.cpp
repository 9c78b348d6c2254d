#include "comm/staging_pool.hpp"

#include <bit>

namespace pickle::comm {
namespace {

constexpr std::size_t kSmallest = 64 << 10;
// Free buffers kept per size: enough for the messages a pair usually has in flight; more are freed on return.
constexpr std::size_t kFreePerSize = 8;

}  // namespace

StagingPool::StagingPool(MemoryKind streams_kind, int device)
    : streams_kind_(streams_kind), device_(device), state_(std::make_shared<State>()) {}

StagingPool::~StagingPool() = default;

std::shared_ptr<std::byte> StagingPool::take(std::size_t bytes) {
  const std::size_t size = std::bit_ceil(std::max(bytes, kSmallest));
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard lock(state_->mutex);
    auto& free = state_->free[size];
    if (!free.empty()) {
      buffer = std::move(free.back());
      free.pop_back();
    }
  }
  if (!buffer) {
    buffer = std::make_unique<Buffer>();
    buffer->memory = device::allocate(MemoryKind::Host, size);
    buffer->registration = device::register_host_memory(streams_kind_, buffer->memory->data(), size, device_);
    std::lock_guard lock(state_->mutex);
    ++state_->buffers;
    state_->bytes += size;
  }
  auto* data = static_cast<std::byte*>(buffer->memory->data());
  std::weak_ptr<State> pool = state_;
  // The deleter owns the buffer while it is out, and hands it back (or frees it, when the pool is gone). It may run
  // in a CUDA host callback (a receive's buffer returns from the staging stream once copied out), where CUDA must
  // not be called: a buffer beyond what the pool keeps is left for free_surplus() (cudaHostUnregister).
  return std::shared_ptr<std::byte>(data, [pool, size, owned = std::shared_ptr<Buffer>(std::move(buffer))](std::byte*) mutable {
    auto state = pool.lock();
    if (!state) return;
    std::lock_guard lock(state->mutex);
    auto& free = state->free[size];
    if (free.size() >= kFreePerSize) {
      --state->buffers;
      state->bytes -= size;
      state->surplus.push_back(std::make_unique<Buffer>(std::move(*owned)));
      return;
    }
    free.push_back(std::make_unique<Buffer>(std::move(*owned)));
  });
}

void StagingPool::free_surplus() {
  std::vector<std::unique_ptr<Buffer>> surplus;
  {
    std::lock_guard lock(state_->mutex);
    surplus.swap(state_->surplus);
  }
  // Freed here, on the caller's thread, without the pool's lock.
}

std::size_t StagingPool::buffers() const {
  std::lock_guard lock(state_->mutex);
  return state_->buffers;
}

std::size_t StagingPool::bytes() const {
  std::lock_guard lock(state_->mutex);
  return state_->bytes;
}

}  // namespace pickle::comm
