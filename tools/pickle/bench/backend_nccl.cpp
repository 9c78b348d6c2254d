// NCCL's send/recv as the reference to beat: libnccl.so.2 loaded at run time, a 2-rank communicator bootstrapped
// through pickle's store (rank 0's ncclUniqueId under one key), kernels enqueued on the same timing stream as the
// other backends. A run without NCCL or without GPUs reports the backend as unavailable, not failed.
#include <pickle/error.hpp>

#include "backend.hpp"
#include "cuda_device.hpp"
#include "core/format.hpp"
#include "nccl_session.hpp"

namespace pickle::bench {
namespace {

constexpr const char* kIdKey = "bench/p2p/nccl/unique-id";

class NcclBackend final : public P2pBackend {
 public:
  std::string_view name() const noexcept override { return "nccl"; }

  void probe(P2pContext& ctx) override {
    if (ctx.kind() != MemoryKind::Cuda) {
      throw UnavailableError("nccl needs GPU memory; this run uses host memory (no 2 GPUs, or --memory host)");
    }
    if (auto problem = nccl_gpu_sharing_problem(2); !problem.empty()) throw UnavailableError(problem);
    nccl_.load();
  }

  std::string detail() const override { return nccl_.detail(); }

  void setup(P2pContext& ctx) override {
    nccl_.connect(ctx.store(), kIdKey, 2, ctx.rank(),
                  describe({.rank = ctx.rank(), .peer = ctx.peer(), .op = "NCCL communicator init"}));
  }

  bool times(Mode, int) const override { return true; }
  // One kernel per call (two in lat), but each also takes room in NCCL's work FIFO, and a full FIFO makes the
  // enqueueing host wait for the GPU: counted double, to stay far from that behind a closed gate.
  int ops_per_iteration(Mode mode) const override { return mode == Mode::Lat ? 4 : 2; }

  void enqueue(P2pContext& ctx, Mode mode, std::size_t bytes, int iterations) override {
    void* stream = ctx.stream().native_handle();
    const int peer = ctx.peer();
    const NcclApi& api = nccl_.api();
    NcclComm comm = nccl_.comm();
    auto send = [&] {
      api.check(api.send(ctx.send_buffer(), bytes, kNcclInt8, peer, comm, stream), "ncclSend",
                describe({.rank = ctx.rank(), .peer = peer, .op = "ncclSend", .bytes = bytes}), comm);
    };
    auto recv = [&] {
      api.check(api.recv(ctx.recv_buffer(), bytes, kNcclInt8, peer, comm, stream), "ncclRecv",
                describe({.rank = ctx.rank(), .peer = peer, .op = "ncclRecv", .bytes = bytes}), comm);
    };
    auto group = [&](bool start) {
      api.check(start ? api.group_start() : api.group_end(), start ? "ncclGroupStart" : "ncclGroupEnd",
                describe({.rank = ctx.rank(), .peer = peer, .op = "NCCL send+recv", .bytes = bytes}), comm);
    };
    for (int i = 0; i < iterations; ++i) {
      switch (mode) {
        case Mode::Uni:
          if (ctx.rank() == 0) send();
          else recv();
          break;
        case Mode::Bi:
          group(true);
          send();
          recv();
          group(false);
          break;
        case Mode::Lat:
          if (ctx.rank() == 0) {
            send();
            recv();
          } else {
            recv();
            send();
          }
          break;
      }
    }
  }

  void abandon() noexcept override { nccl_.abandon(); }

 private:
  NcclSession nccl_;
};

}  // namespace

std::unique_ptr<P2pBackend> make_nccl_backend() { return std::make_unique<NcclBackend>(); }

}  // namespace pickle::bench
