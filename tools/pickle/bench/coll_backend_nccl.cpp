// NCCL's collectives as the reference to beat: libnccl.so.2 loaded at run time, one communicator of every rank
// bootstrapped through pickle's store (rank 0's ncclUniqueId under one key), kernels enqueued on the same timing
// stream as pickle's work. A run without NCCL or without GPUs reports the backend as unavailable, not failed.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "coll_backend.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "nccl_api.hpp"

namespace pickle::bench {
namespace {

int nccl_type(DataType type) {
  switch (type) {
    case DataType::F32:
      return kNcclFloat32;
    case DataType::F16:
      return kNcclFloat16;
    case DataType::BF16:
      return kNcclBfloat16;
    case DataType::F64:
      return kNcclFloat64;
    case DataType::I32:
      return kNcclInt32;
    case DataType::I64:
      return kNcclInt64;
    case DataType::U8:
      return kNcclUint8;
  }
  throw InvalidArgument("NCCL: unknown datatype");
}

int nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return kNcclSum;
    case ReduceOp::Prod:
      return kNcclProd;
    case ReduceOp::Min:
      return kNcclMin;
    case ReduceOp::Max:
      return kNcclMax;
    case ReduceOp::Avg:
      return kNcclAvg;
  }
  throw InvalidArgument("NCCL: unknown reduction operator");
}

class NcclCollBackend final : public CollBackend {
 public:
  explicit NcclCollBackend(std::string key) : key_(std::move(key)) {}

  ~NcclCollBackend() override {
    if (comm_ == nullptr) return;
    // Destroy waits for NCCL's work to drain; after a failure the peers may never answer, so abort instead.
    int result = broken_ ? api_->comm_abort(comm_) : api_->comm_destroy(comm_);
    if (result != 0) PICKLE_LOG(Warn, "bench", "NCCL communicator teardown returned " << result);
  }

  std::string_view name() const noexcept override { return "nccl"; }

  void probe(CollContext& ctx) override {
    if (ctx.kind() != MemoryKind::Cuda) {
      throw UnavailableError("nccl needs GPU memory; this run uses host memory (no GPU per rank, or --memory host)");
    }
    // NVLink multicast (NVLS) must stay off on the machines we measure on; NCCL reads this at init.
    auto nvls = env::foreign("NCCL_NVLS_ENABLE");
    if (nvls && *nvls != "0") PICKLE_LOG(Warn, "bench", "NCCL_NVLS_ENABLE=" << *nvls << " overridden to 0");
    if (setenv("NCCL_NVLS_ENABLE", "0", 1) != 0) throw SystemError("setenv NCCL_NVLS_ENABLE", errno);
    api_.emplace(NcclApi::load());
  }

  std::string detail() const override {
    return api_ ? cat("NCCL ", api_->version(), " (", api_->path(), ")") : std::string();
  }

  void setup(CollContext& ctx) override {
    Store& store = ctx.store();
    const std::string id_key = key_ + "/nccl/unique-id";
    NcclUniqueId id{};
    if (ctx.rank() == 0) {
      // The key is always set, with the id or the reason there is none, so that no rank waits in vain.
      try {
        api_->check(api_->get_unique_id(&id), "ncclGetUniqueId", describe({.rank = 0, .op = "NCCL bootstrap"}));
      } catch (const Error& e) {
        store.set(id_key, std::string("E") + e.what());
        throw;
      }
      store.set(id_key, std::string("I") + std::string(id.internal, sizeof id.internal));
    } else {
      std::string blob = store.get_string(id_key);
      if (blob.empty() || blob[0] != 'I' || blob.size() != 1 + sizeof id.internal) {
        throw PeerError(cat(describe({.rank = ctx.rank(), .peer = 0, .op = "NCCL bootstrap"}),
                            ": rank 0 has no NCCL id: ", blob.empty() ? std::string() : blob.substr(1)),
                        0);
      }
      std::memcpy(id.internal, blob.data() + 1, sizeof id.internal);
    }
    NcclComm comm = nullptr;  // kept only once init succeeded: a failed init leaves nothing to tear down
    api_->check(api_->comm_init_rank(&comm, ctx.world_size(), id, ctx.rank()), "ncclCommInitRank",
                describe({.rank = ctx.rank(), .op = cat("NCCL communicator init of ", ctx.world_size(), " ranks")}));
    comm_ = comm;
  }

  std::string in_place_unsupported(Collective coll) const override {
    // ncclAlltoAll documents no in-place form, and a group of sends and receives on one buffer would race.
    if (coll == Collective::AllToAll) return "NCCL has no in-place alltoall";
    return {};
  }

  void enqueue(CollContext& ctx, const CollCall& call) override {
    void* stream = ctx.stream().native_handle();
    const int type = nccl_type(call.type);
    const std::size_t bytes = call.count * datatype_size(call.type);
    const std::string what =
        describe({.rank = ctx.rank(), .op = cat("NCCL ", collective_name(call.coll)), .bytes = bytes});
    switch (call.coll) {
      case Collective::AllReduce:
        api_->check(api_->all_reduce(call.send, call.recv, call.count, type, nccl_op(call.op), comm_, stream),
                    "ncclAllReduce", what, comm_);
        return;
      case Collective::AllGather:
        api_->check(api_->all_gather(call.send, call.recv, call.count, type, comm_, stream), "ncclAllGather", what,
                    comm_);
        return;
      case Collective::Broadcast:
        api_->check(api_->broadcast(call.send, call.recv, call.count, type, call.root, comm_, stream), "ncclBroadcast",
                    what, comm_);
        return;
      case Collective::ReduceScatter:
        api_->check(api_->reduce_scatter(call.send, call.recv, call.count, type, nccl_op(call.op), comm_, stream),
                    "ncclReduceScatter", what, comm_);
        return;
      case Collective::AllToAll:
        if (api_->all_to_all != nullptr) {
          api_->check(api_->all_to_all(call.send, call.recv, call.count, type, comm_, stream), "ncclAlltoAll", what,
                      comm_);
        } else {
          alltoall_by_send_recv(ctx, call, type, stream, what);
        }
        return;
    }
  }

  void abandon() noexcept override { broken_ = true; }

 private:
  /// Before ncclAlltoAll (NCCL < 2.28): one group of a send and a receive per rank, as nccl-tests does.
  void alltoall_by_send_recv(CollContext& ctx, const CollCall& call, int type, void* stream, const std::string& what) {
    const std::size_t block = call.count * datatype_size(call.type);
    const auto* send = static_cast<const std::byte*>(call.send);
    auto* recv = static_cast<std::byte*>(call.recv);
    api_->check(api_->group_start(), "ncclGroupStart", what, comm_);
    for (int peer = 0; peer < ctx.world_size(); ++peer) {
      const std::size_t offset = static_cast<std::size_t>(peer) * block;
      api_->check(api_->send(send + offset, call.count, type, peer, comm_, stream), "ncclSend", what, comm_);
      api_->check(api_->recv(recv + offset, call.count, type, peer, comm_, stream), "ncclRecv", what, comm_);
    }
    api_->check(api_->group_end(), "ncclGroupEnd", what, comm_);
  }

  std::string key_;
  std::optional<NcclApi> api_;
  NcclComm comm_ = nullptr;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<CollBackend> make_nccl_coll_backend(const std::string& key) {
  return std::make_unique<NcclCollBackend>(key);
}

}  // namespace pickle::bench
