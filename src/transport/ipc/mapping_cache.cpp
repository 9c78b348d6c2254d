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
  std::shared_ptr<device::ImportedMemory> mapping;
  SerialWorker* closer = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = mappings_.find({peer, id});
    if (it == mappings_.end()) return;
    mapping = std::move(it->second);
    mappings_.erase(it);
    ++closes_;
    if (mapping->descriptor().method == device::AllocMethod::CudaVmm) {
      if (!closer_) closer_ = std::make_unique<SerialWorker>("ipc mapping closer");
      closer = closer_.get();
    }
  }
  auto close = [mapping = std::move(mapping), peer, id]() mutable {
    mapping.reset();
    PICKLE_LOG(Debug, "ipc", "unmapped peer " << peer << "'s allocation " << id << ", which it released");
  };
  // A VMM mapping is unmapped on the closer's thread, outside the lock: it waits for the device first (see release
  // in the header). A cudaMalloc allocation's handle is closed here: the exporter's next cudaMalloc may hand out the
  // same handle, whose import must find this one closed (a handle opens once per process), so it cannot wait.
  if (closer != nullptr) {
    closer->post(std::move(close));
  } else {
    close();
  }
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
