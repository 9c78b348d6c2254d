#include "transport/net/registration_cache.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "device/backends.hpp"
#include "device/memory.hpp"

namespace pickle::transport::net {

RegistrationCache::RegistrationCache(std::vector<Domain> domains, bool prov_key, int rank,
                                     std::function<bool()> failed_peers_closed)
    : domains_(std::move(domains)),
      prov_key_(prov_key),
      rank_(rank),
      failed_peers_closed_(std::move(failed_peers_closed)) {
  if (prov_key_ && domains_.size() > 1) {
    throw Error(ErrorCode::Internal, "net transport: provider-chosen keys cannot be shared by several domains");
  }
}

RegistrationCache::~RegistrationCache() {
  std::lock_guard lock(mutex_);
  for (auto& [id, entry] : by_allocation_) close(entry);
}

void RegistrationCache::close(Entry& entry) {
  // Each registration is closed under its domain's lock: the rail's thread may still be polling that domain (and a
  // software provider copies arriving data while it polls).
  for (std::size_t d = 0; d < entry.mrs.size(); ++d) {
    std::lock_guard domain_lock(*domains_[d].lock);
    entry.mrs[d].reset();
  }
}

void RegistrationCache::release_freed() {
  if (by_allocation_.empty() || !failed_peers_closed_()) return;
  // Registrations are of pickle host allocations only, so their liveness is asked of pickle's host registry alone:
  // never of CUDA, since this may run in a CUDA host callback (a staged put's write registers its source there on
  // providers that want local registrations), where CUDA must not be called.
  for (auto it = by_allocation_.begin(); it != by_allocation_.end();) {
    const auto found = device::host::find_allocation(it->second.base);
    if ((found && found->id == it->first) || it->second.in_use.use_count() > 1) {
      ++it;
      continue;
    }
    close(it->second);
    ++releases_;
    it = by_allocation_.erase(it);  // the mapping (keep_mapped) goes with the entry, after its registrations
  }
}

const RegistrationCache::Entry& RegistrationCache::find_or_register(const void* ptr, std::size_t bytes,
                                                                    const char* op, bool counted) {
  const OpContext where{rank_, -1, op, bytes};
  device::AllocationInfo allocation;
  try {
    allocation = device::find_allocation(ptr);
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat(describe(where), ": the net transport registers pickle host allocations only (",
                              error.what(), ")"));
  }
  if (allocation.kind != MemoryKind::Host) {
    throw InvalidArgument(cat(describe(where), ": the net transport takes host memory only; GPU memory is staged "
                              "through pinned host buffers by the caller"));
  }
  if (bytes > allocation.bytes - allocation.offset) {
    throw InvalidArgument(cat(describe(where), ": the range runs ", bytes - (allocation.bytes - allocation.offset),
                              " bytes past the end of its allocation of ", allocation.bytes, " bytes"));
  }
  std::lock_guard lock(mutex_);
  auto found = by_allocation_.find(allocation.id);
  if (found != by_allocation_.end()) {
    if (counted) ++hits_;
    return found->second;
  }
  release_freed();
  Entry entry;
  entry.keep_mapped = device::keep_host_mapping(allocation.base);
  if (!entry.keep_mapped) {
    throw InvalidArgument(cat(describe(where), ": the allocation at ", allocation.base, " was freed meanwhile"));
  }
  entry.base = static_cast<std::byte*>(allocation.base);
  entry.bytes = allocation.bytes;
  const std::uint64_t requested = prov_key_ ? 0 : next_key_++;
  const OpContext registering{rank_, -1, "registration of an allocation", allocation.bytes};
  try {
    for (std::size_t d = 0; d < domains_.size(); ++d) {
      std::lock_guard domain_lock(*domains_[d].lock);
      entry.mrs.push_back(register_memory(domains_[d].domain, allocation.base, allocation.bytes,
                                          FI_WRITE | FI_REMOTE_WRITE, requested, registering));
      entry.descs.push_back(fi_mr_desc(entry.mrs.back().get()));
      const std::uint64_t key = fi_mr_key(entry.mrs.back().get());
      if (d == 0) {
        entry.key = key;
      } else if (key != entry.key) {
        throw Error(ErrorCode::Internal, cat(describe(registering), ": domain ", d, " gave key ", key, " instead of ",
                                             entry.key));
      }
    }
  } catch (...) {
    close(entry);  // the domains already done
    throw;
  }
  if (counted) ++registrations_;
  return by_allocation_.emplace(allocation.id, std::move(entry)).first->second;
}

std::shared_ptr<const void> RegistrationCache::pin(const void* ptr) const {
  const auto found = device::host::find_allocation(ptr);
  if (!found) return nullptr;
  std::lock_guard lock(mutex_);
  auto it = by_allocation_.find(found->id);
  return it == by_allocation_.end() ? nullptr : it->second.in_use;
}

std::uint64_t RegistrationCache::registrations() const {
  std::lock_guard lock(mutex_);
  return registrations_;
}

std::uint64_t RegistrationCache::releases() const {
  std::lock_guard lock(mutex_);
  return releases_;
}

std::uint64_t RegistrationCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

}  // namespace pickle::transport::net
