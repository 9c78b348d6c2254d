// NCCL's collectives as the reference to beat: libnccl.so.2 loaded at run time, one communicator of every rank
// bootstrapped through pickle's store (rank 0's ncclUniqueId under one key), kernels enqueued on the same timing
// stream as pickle's work. A run without NCCL or without GPUs reports the backend as unavailable, not failed.
//
// Two modes, both measured because pickle is judged against the better (docs/design.md section 3): "nccl", NCCL as it
// comes, and "nccl-zero", its zero-SM mode since 2.27: a communicator configured with CTAPolicy =
// NCCL_CTA_POLICY_ZERO whose buffers come from ncclMemAlloc and are registered as symmetric windows
// (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), so that NCCL may move allgather's data with copy engines.
#include <array>
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
  NcclCollBackend(std::string key, bool zero_cta) : key_(std::move(key)), zero_cta_(zero_cta) {}
  ~NcclCollBackend() override { release(); }

  std::string_view name() const noexcept override { return zero_cta_ ? "nccl-zero" : "nccl"; }

  void probe(CollContext& ctx) override {
    if (ctx.kind() != MemoryKind::Cuda) {
      throw UnavailableError(cat(name(), " needs GPU memory; this run uses host memory (no GPU per rank, or --memory "
                                 "host)"));
    }
    const int local_ranks = ctx.store().self().local_world_size;
    if (auto problem = nccl_gpu_sharing_problem(local_ranks); !problem.empty()) throw UnavailableError(problem);
    nccl_.load();
    if (zero_cta_) {
      if (auto problem = nccl_.api().zero_cta_problem(); !problem.empty()) throw UnavailableError(problem);
    }
  }

  std::string detail() const override {
    if (!zero_cta_ || nccl_.detail().empty()) return nccl_.detail();
    return cat(nccl_.detail(),
               "; CTAPolicy NCCL_CTA_POLICY_ZERO, ncclMemAlloc buffers as NCCL_WIN_COLL_SYMMETRIC windows");
  }

  void setup(CollContext& ctx) override {
    const std::string what =
        describe({.rank = ctx.rank(), .op = cat(name(), " communicator init of ", ctx.world_size(), " ranks")});
    if (!zero_cta_) {
      nccl_.connect(ctx.store(), key_ + "/nccl/unique-id", ctx.world_size(), ctx.rank(), what);
      return;
    }
    const NcclApi& api = nccl_.api();
    NcclConfig config = api.default_config();
    config.CTAPolicy = kNcclCtaPolicyZero;
    nccl_.connect(ctx.store(), key_ + "/nccl-zero/unique-id", ctx.world_size(), ctx.rank(), what, &config);
    // The runner's buffers are pickle's; symmetric windows want NCCL's own memory, as large on every rank.
    const std::size_t bytes = ctx.buffer_bytes();
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      const std::string step =
          describe({.rank = ctx.rank(), .op = cat(name(), " buffer ", i, " (ncclMemAlloc + window)"), .bytes = bytes});
      api.check(api.mem_alloc(&buffers_[i], bytes), "ncclMemAlloc", step);
      api.check(api.comm_window_register(nccl_.comm(), buffers_[i], bytes, &windows_[i], kNcclWinCollSymmetric),
                "ncclCommWindowRegister", step, nccl_.comm());
    }
  }

  std::byte* buffer(CollContext& ctx, int index) override {
    return zero_cta_ ? static_cast<std::byte*>(buffers_.at(static_cast<std::size_t>(index))) : ctx.buffer(index);
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

  void enqueue_send(CollContext& ctx, int peer, const void* data, std::size_t bytes) override {
    const NcclApi& api = nccl_.api();
    api.check(api.send(data, bytes, kNcclUint8, peer, nccl_.comm(), ctx.stream().native_handle()), "ncclSend",
              describe({.rank = ctx.rank(), .peer = peer, .op = "NCCL send", .bytes = bytes}), nccl_.comm());
  }

  void enqueue_recv(CollContext& ctx, int peer, void* data, std::size_t bytes) override {
    const NcclApi& api = nccl_.api();
    api.check(api.recv(data, bytes, kNcclUint8, peer, nccl_.comm(), ctx.stream().native_handle()), "ncclRecv",
              describe({.rank = ctx.rank(), .peer = peer, .op = "NCCL recv", .bytes = bytes}), nccl_.comm());
  }

  void abandon() noexcept override {
    abandoned_ = true;
    nccl_.abandon();
  }

 private:
  /// Windows go before the communicator (deregistering is collective: skipped after a failure, when the peers may
  /// be gone), the memory after it.
  void release() noexcept {
    const bool loaded = !nccl_.detail().empty();
    for (std::size_t i = 0; i < windows_.size() && loaded && !abandoned_; ++i) {
      if (windows_[i] != nullptr) (void)nccl_.api().comm_window_deregister(nccl_.comm(), windows_[i]);
    }
    nccl_.close();
    for (void*& buffer : buffers_) {
      if (buffer != nullptr && loaded) (void)nccl_.api().mem_free(buffer);
      buffer = nullptr;
    }
  }

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
  bool zero_cta_;
  bool abandoned_ = false;
  NcclSession nccl_;
  std::array<void*, 2> buffers_{};     // nccl-zero: send and receive memory from ncclMemAlloc
  std::array<NcclWindow, 2> windows_{};  // ... and their symmetric windows
};

}  // namespace

std::unique_ptr<CollBackend> make_nccl_coll_backend(const std::string& key, bool zero_cta) {
  return std::make_unique<NcclCollBackend>(key, zero_cta);
}

}  // namespace pickle::bench
