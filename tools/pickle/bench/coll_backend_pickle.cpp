// pickle itself: Communicator collectives over every rank of the job, enqueued on the timing stream (wrapped as a
// pickle::Stream), on the same buffers as NCCL. The Communicator brings its own store, on a fresh port that rank 0
// picks and publishes in the benchmark's store, so that the benchmark's store stays out of it.
#include <optional>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>
#include <pickle/stream.hpp>

#include "../launcher.hpp"
#include "coll_backend.hpp"
#include "core/format.hpp"

namespace pickle::bench {
namespace {

/// A Communicator of every rank of `store`'s job on a fresh port that rank 0 picks and publishes under `port_key`.
Communicator connect_world_communicator(Store& store, MemoryKind kind, int device, const std::string& port_key) {
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
  info.source = "explicit";
  Communicator::Options options;
  options.rank_info = info;
  options.memory = kind;
  options.device = kind == MemoryKind::Cuda ? device : -1;
  return Communicator(options);
}

class PickleCollBackend final : public CollBackend {
 public:
  explicit PickleCollBackend(std::string key) : key_(std::move(key)) {}

  std::string_view name() const noexcept override { return "pickle"; }

  void probe(CollContext&) override {}

  void setup(CollContext& ctx) override {
    comm_.emplace(connect_world_communicator(ctx.store(), ctx.kind(), ctx.device(), key_ + "/pickle/port"));
    stream_.emplace(ctx.stream_handle());
  }

  void enqueue(CollContext&, const CollCall& call) override {
    Stream& s = *stream_;
    switch (call.coll) {
      case Collective::AllReduce:
        comm_->allreduce(s, call.send, call.recv, call.count, call.type, call.op);
        return;
      case Collective::AllGather:
        comm_->allgather(s, call.send, call.recv, call.count, call.type);
        return;
      case Collective::Broadcast:
        comm_->broadcast(s, call.send, call.recv, call.count, call.type, call.root);
        return;
      case Collective::AllToAll:
        comm_->alltoall(s, call.send, call.recv, call.count, call.type);
        return;
      case Collective::ReduceScatter:
        comm_->reduce_scatter(s, call.send, call.recv, call.count, call.type, call.op);
        return;
    }
  }

 private:
  std::string key_;
  std::optional<Communicator> comm_;
  std::optional<Stream> stream_;
};

}  // namespace

std::unique_ptr<CollBackend> make_pickle_coll_backend(const std::string& key) {
  return std::make_unique<PickleCollBackend>(key);
}

}  // namespace pickle::bench
