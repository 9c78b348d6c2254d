// NCCL's collectives as the reference to beat: libnccl.so.2 loaded at run time, one communicator of every rank
// bootstrapped through pickle's store (rank 0's ncclUniqueId under one key), kernels enqueued on the same timing
// stream as pickle's work. A run without NCCL or without GPUs reports the backend as unavailable, not failed.
#include <cstddef>

#include <pickle/error.hpp>

#include "coll_backend.hpp"
#include "core/format.hpp"
#include "cuda_device.hpp"
#include "nccl_session.hpp"

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

  std::string_view name() const noexcept override { return "nccl"; }

  void probe(CollContext& ctx) override {
    if (ctx.kind() != MemoryKind::Cuda) {
      throw UnavailableError("nccl needs GPU memory; this run uses host memory (no GPU per rank, or --memory host)");
    }
    const int local_ranks = ctx.store().self().local_world_size;
    if (auto problem = nccl_gpu_sharing_problem(local_ranks); !problem.empty()) throw UnavailableError(problem);
    nccl_.load();
  }

  std::string detail() const override { return nccl_.detail(); }

  void setup(CollContext& ctx) override {
    nccl_.connect(ctx.store(), key_ + "/nccl/unique-id", ctx.world_size(), ctx.rank(),
                  describe({.rank = ctx.rank(), .op = cat("NCCL communicator init of ", ctx.world_size(), " ranks")}));
  }

  std::string in_place_unsupported(Collective coll) const override {
    // ncclAlltoAll documents no in-place form, and a group of sends and receives on one buffer would race.
    if (coll == Collective::AllToAll) return "NCCL has no in-place alltoall";
    return {};
  }

  void enqueue(CollContext& ctx, const CollCall& call) override {
    void* stream = ctx.stream().native_handle();
    const NcclApi& api = nccl_.api();
    NcclComm comm = nccl_.comm();
    const int type = nccl_type(call.type);
    const std::size_t bytes = call.count * datatype_size(call.type);
    const std::string what =
        describe({.rank = ctx.rank(), .op = cat("NCCL ", collective_name(call.coll)), .bytes = bytes});
    switch (call.coll) {
      case Collective::AllReduce:
        api.check(api.all_reduce(call.send, call.recv, call.count, type, nccl_op(call.op), comm, stream),
                  "ncclAllReduce", what, comm);
        return;
      case Collective::AllGather:
        api.check(api.all_gather(call.send, call.recv, call.count, type, comm, stream), "ncclAllGather", what, comm);
        return;
      case Collective::Broadcast:
        api.check(api.broadcast(call.send, call.recv, call.count, type, call.root, comm, stream), "ncclBroadcast",
                  what, comm);
        return;
      case Collective::ReduceScatter:
        api.check(api.reduce_scatter(call.send, call.recv, call.count, type, nccl_op(call.op), comm, stream),
                  "ncclReduceScatter", what, comm);
        return;
      case Collective::AllToAll:
        if (api.all_to_all != nullptr) {
          api.check(api.all_to_all(call.send, call.recv, call.count, type, comm, stream), "ncclAlltoAll", what, comm);
        } else {
          alltoall_by_send_recv(ctx, call, type, stream, what);
        }
        return;
    }
  }

  void abandon() noexcept override { nccl_.abandon(); }

 private:
  /// Before ncclAlltoAll (NCCL < 2.28): one group of a send and a receive per rank, as nccl-tests does.
  void alltoall_by_send_recv(CollContext& ctx, const CollCall& call, int type, void* stream, const std::string& what) {
    const std::size_t block = call.count * datatype_size(call.type);
    const auto* send = static_cast<const std::byte*>(call.send);
    auto* recv = static_cast<std::byte*>(call.recv);
    const NcclApi& api = nccl_.api();
    NcclComm comm = nccl_.comm();
    api.check(api.group_start(), "ncclGroupStart", what, comm);
    for (int peer = 0; peer < ctx.world_size(); ++peer) {
      const std::size_t offset = static_cast<std::size_t>(peer) * block;
      api.check(api.send(send + offset, call.count, type, peer, comm, stream), "ncclSend", what, comm);
      api.check(api.recv(recv + offset, call.count, type, peer, comm, stream), "ncclRecv", what, comm);
    }
    api.check(api.group_end(), "ncclGroupEnd", what, comm);
  }

  std::string key_;
  NcclSession nccl_;
};

}  // namespace

std::unique_ptr<CollBackend> make_nccl_coll_backend(const std::string& key) {
  return std::make_unique<NcclCollBackend>(key);
}

}  // namespace pickle::bench
