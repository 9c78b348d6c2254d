#include "comm/store_registry.hpp"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace pickle::comm {

std::shared_ptr<Store> shared_store(const RankInfo& self, const Store::Options& options) {
  using Key = std::tuple<std::string, int, int, int>;
  static std::mutex mutex;
  // Kept until the process exits, not only while a communicator uses it: a store created again on the same port
  // could have its clients accepted by the previous one, still finishing on rank 0, and the job would hang. At exit
  // the stores are destroyed, and rank 0's waits (bounded) until the other ranks have left it.
  static std::map<Key, std::shared_ptr<Store>> stores;
  std::lock_guard lock(mutex);
  Key key{self.master_addr, self.master_port, self.rank, self.world_size};
  auto& store = stores[key];
  if (!store) store = std::make_shared<Store>(self, options);
  return store;
}

}  // namespace pickle::comm
