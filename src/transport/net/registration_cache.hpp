#pragma once
// Memory registrations of the net transport, one per allocation. Registering memory with a NIC pins and maps it
// (tens of microseconds to milliseconds on verbs/efa), so it is done once per allocation, over the whole
// allocation: a buffer inside a larger allocation (a caching allocator's block) and every later transfer to or from
// it register nothing. Allocation ids are unique, so memory freed and allocated again at the same address gets a
// new id and can never hit a stale registration. A registration keeps the allocation's mapping alive
// (Entry::keep_mapped) until it is closed: when the cache goes, or when a later registration finds that the
// allocation was freed (release_freed), so that an application that allocates, receives into and frees buffers in
// turn does not keep every one of them pinned and mapped.
//
// A transport with several rails (rail.hpp) registers each allocation in every rail's domain under one key, which it
// chooses itself (such transports only exist for providers without FI_MR_PROV_KEY), so that a peer's write carries
// the same key whichever rail it takes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/net/fabric_objects.hpp"

namespace pickle::transport::net {

class RegistrationCache {
 public:
  /// A domain to register in, and the lock that serialises calls into it.
  struct Domain {
    fid_domain* domain = nullptr;
    std::mutex* lock = nullptr;
  };
  /// `prov_key`: the provider picks keys (FI_MR_PROV_KEY; one domain only), else we number them.
  /// `failed_peers_closed`: whether every failed peer's endpoints are closed (SharedState::failed_peers_closed);
  /// registrations of freed memory are closed only then.
  RegistrationCache(std::vector<Domain> domains, bool prov_key, int rank, std::function<bool()> failed_peers_closed);
  ~RegistrationCache();

  struct Entry {
    /// The allocation's mapping, kept until the registrations are closed (declared first: destroyed last). A
    /// software provider (tcp) copies a peer's late writes into the registered range while it drains; the user may
    /// have freed the buffer by then (the communicator outlives it), and that copy must not meet unmapped memory.
    std::shared_ptr<const void> keep_mapped;
    std::vector<MemoryRegion> mrs;  ///< one per domain
    std::vector<void*> descs;       ///< fi_mr_desc per domain: local descriptors for FI_MR_LOCAL providers
    std::byte* base = nullptr;      ///< first byte of the registered allocation
    std::size_t bytes = 0;
    std::uint64_t key = 0;          ///< what a peer's RMA write names
    /// Copied by every operation that a provider may still carry out in the allocation (an expected message, a
    /// write from it): the entry is in use while a copy exists beyond this one, and is not closed then.
    std::shared_ptr<const void> in_use = std::make_shared<int>(0);
  };

  /// The registration of the host allocation holding [ptr, ptr + bytes) (device::find_allocation), made on first
  /// use. Memory outside any pickle host allocation, GPU memory, or a range that runs past its allocation is an
  /// InvalidArgument naming `op`. Thread-safe. The entry stays valid until its allocation is freed (the caller uses it
  /// at once, while the memory is in use). `counted` false: the transport's own memory (the set-up handshake's
  /// buffer), left out of registrations() and hits(), which count what the application's traffic needed.
  const Entry& find_or_register(const void* ptr, std::size_t bytes, const char* op, bool counted = true);

  /// What keeps the registration of the allocation holding `ptr` from being closed while an operation on it is
  /// under way (Entry::in_use); null when no registration holds it.
  std::shared_ptr<const void> pin(const void* ptr) const;

  std::uint64_t registrations() const;
  std::uint64_t releases() const;
  std::uint64_t hits() const;

 private:
  std::vector<Domain> domains_;
  bool prov_key_;
  int rank_;
  std::function<bool()> failed_peers_closed_;
  mutable std::mutex mutex_;
  std::uint64_t next_key_ = 1;
  /// Before a new registration (mutex_ held): closes the registrations of allocations that were freed and that no
  /// operation pins (Entry::in_use), and lets their mappings go; none while a failed peer's endpoints are still open
  /// (`failed_peers_closed`). A software provider that took a write into a range goes on copying into it after the
  /// registration closed, and the application may have freed that range early (its error) or after a failed
  /// operation (its right): such a registration waits for a later one.
  void release_freed();
  void close(Entry& entry);

  std::map<std::uint64_t, Entry> by_allocation_;  // allocation id -> registration
  std::uint64_t registrations_ = 0;
  std::uint64_t releases_ = 0;
  std::uint64_t hits_ = 0;
};

}  // namespace pickle::transport::net
