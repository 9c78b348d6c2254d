// pickle itself: Communicator collectives over every rank of the job, enqueued on the timing stream (wrapped as a
// pickle::Stream), on the same buffers as NCCL. The Communicator brings its own store, on a fresh port that rank 0
// picks and publishes in the benchmark's store, so that the benchmark's store stays out of it.
#include <optional>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>
#include <pickle/stream.hpp>

#include "bench_communicator.hpp"
#include "coll_backend.hpp"
#include "core/format.hpp"

namespace pickle::bench {
namespace {

class PickleCollBackend final : public CollBackend {
 public:
  /// The tag of enqueue_send / enqueue_recv (this communicator carries nothing else of the application's).
  static constexpr int kPointToPointTag = 0;

  explicit PickleCollBackend(std::string key) : key_(std::move(key)) {}

  std::string_view name() const noexcept override { return "pickle"; }

  void probe(CollContext&) override {}

  void setup(CollContext& ctx) override {
    comm_.emplace(connect_bench_communicator(ctx.store(), ctx.kind(), ctx.device(), key_ + "/pickle/port"));
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

  void enqueue_send(CollContext&, int peer, const void* data, std::size_t bytes) override {
    comm_->send(peer, kPointToPointTag, data, bytes, &*stream_).on_stream(*stream_);
  }

  void enqueue_recv(CollContext&, int peer, void* data, std::size_t bytes) override {
    comm_->recv(peer, kPointToPointTag, data, bytes).on_stream(*stream_);
  }

  std::optional<std::uint64_t> local_copy_bytes() const override { return comm_->stats().local_copy_bytes; }

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
