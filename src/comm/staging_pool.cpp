#include "comm/staging_pool.hpp"

#include <bit>

namespace pickle::comm {
namespace {

constexpr std::size_t kSmallest = 64 << 10;

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
  // The deleter owns the buffer while it is out and hands it back; when the pool is gone, it frees it, on whichever
  // thread drops the last reference (normally the teardown, after it drained the communicator's callbacks: should
  // that drain time out, a later callback may free it, as the pool always did with buffers returned after it).
  return std::shared_ptr<std::byte>(data, [pool, size, owned = std::shared_ptr<Buffer>(std::move(buffer))](std::byte*) mutable {
    auto state = pool.lock();
    if (!state) return;
    std::lock_guard lock(state->mutex);
    state->free[size].push_back(std::make_unique<Buffer>(std::move(*owned)));
  });
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
