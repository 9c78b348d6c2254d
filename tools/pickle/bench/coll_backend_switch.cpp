// The software switch as a collective backend (`pickle bench scenario switchml`, seed 002): an int32 sum allreduce
// aggregated by SwitchML's protocol on a thread of rank 0 (switch_server.hpp), every rank a worker
// (switch_worker.hpp). The switch's port goes through the benchmark's store; the workers reach it at MASTER_ADDR, the
// address at which the job reaches rank 0. A call is host work, as SwitchML's is (its workers stage GPU tensors
// through host memory): it waits for the stream, copies a GPU tensor to the host, aggregates, and copies the sums
// back, so that the timing stream's events still bracket all of it.
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include <pickle/error.hpp>

#include "coll_backend.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "switch_protocol.hpp"
#include "switch_server.hpp"
#include "switch_worker.hpp"

namespace pickle::bench {
namespace {

class SwitchCollBackend final : public CollBackend {
 public:
  explicit SwitchCollBackend(std::string key) : key_(std::move(key)) {}

  std::string_view name() const noexcept override { return "switch"; }

  void probe(CollContext& ctx) override {
    slots_ = static_cast<int>(env::get_int("PICKLE_SWITCH_SLOTS"));
    numel_ = static_cast<int>(env::get_int("PICKLE_SWITCH_PACKET_NUMEL"));
    if (slots_ < 1 || slots_ > 65536 || numel_ < 1 || numel_ > static_cast<int>(switchml::kMaxNumel)) {
      throw InvalidArgument(cat("PICKLE_SWITCH_SLOTS=", slots_, " and PICKLE_SWITCH_PACKET_NUMEL=", numel_,
                                ": use 1 to 65536 slots and 1 to ", switchml::kMaxNumel, " elements per packet"));
    }
    if (ctx.world_size() > switchml::kMaxWorkers) {
      throw UnavailableError(cat("the software switch serves at most ", switchml::kMaxWorkers,
                                 " workers; this run has ", ctx.world_size(), " ranks"));
    }
  }

  void setup(CollContext& ctx) override {
    // Rank 0's switch: its port, and the slots and packet size every worker must use (each rank reads its own
    // environment; a worker that differs would have its packets ignored as malformed and wait for nothing).
    const std::string key = key_ + "/switch/port-slots-numel";
    if (ctx.rank() == 0) {
      switch_ = std::make_unique<switchml::SoftwareSwitch>(
          switchml::SoftwareSwitch::Options{.workers = ctx.world_size(),
                                            .slots = slots_,
                                            .drop_every = static_cast<int>(env::get_int("PICKLE_TEST_SWITCH_DROP"))});
      receive_buffer_ = switch_->receive_buffer_bytes();
      ctx.store().set(key, cat(switch_->port(), " ", slots_, " ", numel_));
    }
    int port = 0, slots = 0, numel = 0;
    std::istringstream(ctx.store().get_string(key)) >> port >> slots >> numel;
    if (slots != slots_ || numel != numel_) {
      throw InvalidArgument(cat(describe({.rank = ctx.rank(), .op = "software switch set-up"}),
                                ": PICKLE_SWITCH_SLOTS=", slots_, " and PICKLE_SWITCH_PACKET_NUMEL=", numel_, " here, ",
                                slots, " and ", numel, " on rank 0: every rank must use the same"));
    }
    host_ = ctx.store().self().master_addr;
    worker_.emplace(host_, port,
                    switchml::SwitchWorker::Options{.worker = ctx.rank(), .slots = slots_, .numel = numel_});
    port_ = port;
  }

  std::string detail() const override {
    return cat("a thread of rank 0 at ", host_, ":", port_, " (UDP), ", slots_, " slots of ", numel_,
               " int32 per packet",
               receive_buffer_ > 0 ? cat("; its receive buffer ", receive_buffer_ / 1024, " KiB") : std::string());
  }

  void enqueue(CollContext& ctx, const CollCall& call) override {
    const std::size_t bytes = call.count * sizeof(std::int32_t);
    const std::string what = describe({.rank = ctx.rank(), .op = "software switch allreduce", .bytes = bytes});
    if (call.coll != Collective::AllReduce || call.type != DataType::I32 || call.op != ReduceOp::Sum) {
      throw InvalidArgument(cat(what, ": the software switch sums int32 only (SwitchML's integer aggregation)"));
    }
    ctx.stream().synchronize();  // the tensor's producer
    std::int32_t* data = static_cast<std::int32_t*>(call.recv);
    if (ctx.kind() == MemoryKind::Cuda) {
      staging_.resize(call.count);
      ctx.stream().copy(staging_.data(), call.send, bytes);
      ctx.stream().synchronize();
      data = staging_.data();
    } else if (call.send != call.recv) {
      std::memcpy(call.recv, call.send, bytes);
    }
    worker_->allreduce(data, call.count, ctx.store().timeout_seconds(), what);
    if (ctx.kind() == MemoryKind::Cuda) ctx.stream().copy(call.recv, staging_.data(), bytes);
  }

  void enqueue_send(CollContext& ctx, int peer, const void*, std::size_t bytes) override {
    throw InvalidArgument(cat(describe({.rank = ctx.rank(), .peer = peer, .op = "send", .bytes = bytes}),
                              ": the software switch does allreduces only"));
  }
  void enqueue_recv(CollContext& ctx, int peer, void*, std::size_t bytes) override {
    throw InvalidArgument(cat(describe({.rank = ctx.rank(), .peer = peer, .op = "recv", .bytes = bytes}),
                              ": the software switch does allreduces only"));
  }

  json::Value stats() const override {
    json::Value v = json::Value::object();
    v["resends"] = worker_ ? worker_->resends() : 0;
    if (switch_) {
      const auto c = switch_->counters();
      v["switch_received"] = c.received;
      v["switch_sent"] = c.sent;
      v["switch_dropped"] = c.dropped;
      v["switch_duplicates"] = c.duplicates;
      v["switch_stale"] = c.stale;
      v["switch_malformed"] = c.malformed;
    }
    return v;
  }

 private:
  std::string key_;
  int slots_ = 0, numel_ = 0, port_ = 0;
  int receive_buffer_ = 0;  // rank 0's switch socket's, as granted
  std::string host_;
  std::unique_ptr<switchml::SoftwareSwitch> switch_;  // rank 0's
  std::optional<switchml::SwitchWorker> worker_;
  std::vector<std::int32_t> staging_;
};

}  // namespace

std::unique_ptr<CollBackend> make_switch_coll_backend(const std::string& key) {
  return std::make_unique<SwitchCollBackend>(key);
}

}  // namespace pickle::bench
