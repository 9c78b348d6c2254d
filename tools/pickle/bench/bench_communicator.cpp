#include "bench_communicator.hpp"

#include <pickle/error.hpp>

#include "../launcher.hpp"
#include "core/format.hpp"

namespace pickle::bench {

Communicator connect_bench_communicator(Store& store, MemoryKind kind, int device, const std::string& port_key,
                                        int ranks) {
  RankInfo info = store.self();
  if (info.rank == 0) {
    // The key is always set, with the port or the reason there is none, so that no rank waits in vain.
    try {
      info.master_port = launch::pick_free_port(info.master_addr);
    } catch (const Error& e) {
      store.set(port_key, cat("E", e.what()));
      throw;
    }
    store.set(port_key, cat("P", info.master_port));
  } else {
    std::string value = store.get_string(port_key);
    if (value.empty() || value[0] != 'P') {
      throw PeerError(cat(describe({.rank = info.rank, .peer = 0, .op = "pickle communicator set-up"}),
                          ": rank 0 has no port for the communicator: ", value.empty() ? value : value.substr(1)),
                      0);
    }
    info.master_port = std::stoi(value.substr(1));
  }
  if (ranks > 0) {
    info.world_size = ranks;
    info.local_world_size = ranks;
  }
  info.source = "explicit";
  Communicator::Options options;
  options.rank_info = info;
  options.memory = kind;
  options.device = kind == MemoryKind::Cuda ? device : -1;
  return Communicator(options);
}

}  // namespace pickle::bench
