#include "comm/store_registry.hpp"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace pickle::comm {

namespace {

using Key = std::tuple<std::string, int, int, int>;
struct Entry {
  std::mutex mutex;  // held while the store is made: a second communicator of the same rank waits for it
  std::shared_ptr<Store> store;
};
struct Registry {
  std::mutex mutex;
  std::map<Key, std::shared_ptr<Entry>> entries;
};

/// Made on first use (a function's static), so that it goes at exit before what existed earlier (the log): kept
/// until the process exits, not only while a communicator uses it: a store created again on the same port could have
/// its clients accepted by the previous one, still finishing on rank 0, and the job would hang. At exit the stores
/// are destroyed, and rank 0's waits (bounded) until the other ranks have left it.
Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

std::shared_ptr<Store> shared_store(const RankInfo& self, const Store::Options& options) {
  std::shared_ptr<Entry> entry;
  {
    // Only the lookup is under the registry's lock: making a store waits for every rank of its job, and ranks run as
    // threads of one process (tests, probes) must be able to make theirs at the same time.
    Registry& known = registry();
    std::lock_guard lock(known.mutex);
    auto& slot = known.entries[Key{self.master_addr, self.master_port, self.rank, self.world_size}];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard lock(entry->mutex);
  if (!entry->store) entry->store = std::make_shared<Store>(self, options);
  return entry->store;
}

void mark_shared_stores_failed() noexcept {
  Registry& known = registry();
  std::lock_guard lock(known.mutex);
  for (auto& [key, entry] : known.entries) {
    // An entry whose store is being made holds its own mutex for the whole rendezvous: skipped, not waited for.
    std::unique_lock made(entry->mutex, std::try_to_lock);
    if (made.owns_lock() && entry->store) entry->store->mark_job_failed();
  }
}

}  // namespace pickle::comm
