#include "transport/ipc/mapping_cache.hpp"

#include "core/log.hpp"

namespace pickle::transport::ipc {

void MappingCache::insert(int peer, const device::MemoryDescriptor& descriptor, UniqueFd fd) {
  {
    std::lock_guard lock(mutex_);
    if (mappings_.count({peer, descriptor.id}) != 0) return;
  }
  // Map outside the lock: it takes milliseconds, and lookups for other allocations need not wait for it.
  auto mapping = device::import_memory(descriptor, std::move(fd), local_device_);
  PICKLE_LOG(Debug, "ipc", "mapped peer " << peer << "'s allocation " << descriptor.id << " of " << descriptor.bytes
                                          << " bytes");
  std::lock_guard lock(mutex_);
  mappings_.emplace(std::make_pair(peer, descriptor.id), std::move(mapping));
  ++opens_;
}

device::ImportedMemory* MappingCache::find(int peer, std::uint64_t id) {
  std::lock_guard lock(mutex_);
  auto it = mappings_.find({peer, id});
  if (it == mappings_.end()) return nullptr;
  ++hits_;
  return it->second.get();
}

bool MappingCache::contains(int peer, std::uint64_t id) const {
  std::lock_guard lock(mutex_);
  return mappings_.count({peer, id}) != 0;
}

void MappingCache::release(int peer, std::uint64_t id) {
  std::unique_ptr<device::ImportedMemory> mapping;
  {
    std::lock_guard lock(mutex_);
    auto it = mappings_.find({peer, id});
    if (it == mappings_.end()) return;
    mapping = std::move(it->second);
    mappings_.erase(it);
    ++closes_;
  }
  // Unmapped outside the lock, like insert's mapping: it may take a while.
  mapping.reset();
  PICKLE_LOG(Debug, "ipc", "unmapped peer " << peer << "'s allocation " << id << ", which it released");
}

std::uint64_t MappingCache::opens() const {
  std::lock_guard lock(mutex_);
  return opens_;
}

std::uint64_t MappingCache::closes() const {
  std::lock_guard lock(mutex_);
  return closes_;
}

std::uint64_t MappingCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

}  // namespace pickle::transport::ipc
