// NCCL's send/recv as the reference to beat: libnccl.so.2 loaded at run time, a 2-rank communicator bootstrapped
// through pickle's store (rank 0's ncclUniqueId under one key), kernels enqueued on the same timing stream as the
// other backends. A run without NCCL or without GPUs reports the backend as unavailable, not failed.
#include <cstdlib>
#include <cstring>
#include <optional>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "backend.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "nccl_api.hpp"

namespace pickle::bench {
namespace {

constexpr const char* kIdKey = "bench/p2p/nccl/unique-id";

class NcclBackend final : public P2pBackend {
 public:
  ~NcclBackend() override {
    if (comm_ == nullptr) return;
    // Destroy waits for NCCL's work to drain; after a failure the peer may never answer, so abort instead.
    int result = broken_ ? api_->comm_abort(comm_) : api_->comm_destroy(comm_);
    if (result != 0) PICKLE_LOG(Warn, "bench", "NCCL communicator teardown returned " << result);
  }

  std::string_view name() const noexcept override { return "nccl"; }

  void probe(P2pContext& ctx) override {
    if (ctx.kind() != MemoryKind::Cuda) {
      throw UnavailableError("nccl needs GPU memory; this run uses host memory (no 2 GPUs, or --memory host)");
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

  void setup(P2pContext& ctx) override {
    Store& store = ctx.store();
    NcclUniqueId id{};
    if (ctx.rank() == 0) {
      // The key is always set, with the id or the reason there is none, so that rank 1 never waits in vain.
      try {
        api_->check(api_->get_unique_id(&id), "ncclGetUniqueId", describe({.rank = 0, .op = "NCCL bootstrap"}));
      } catch (const Error& e) {
        store.set(kIdKey, std::string("E") + e.what());
        throw;
      }
      store.set(kIdKey, std::string("I") + std::string(id.internal, sizeof id.internal));
    } else {
      std::string blob = store.get_string(kIdKey);
      if (blob.empty() || blob[0] != 'I' || blob.size() != 1 + sizeof id.internal) {
        throw PeerError(cat(describe({.rank = ctx.rank(), .peer = 0, .op = "NCCL bootstrap"}),
                            ": rank 0 has no NCCL id: ", blob.empty() ? std::string() : blob.substr(1)),
                        0);
      }
      std::memcpy(id.internal, blob.data() + 1, sizeof id.internal);
    }
    NcclComm comm = nullptr;  // kept only once init succeeded: a failed init leaves nothing to tear down
    api_->check(api_->comm_init_rank(&comm, 2, id, ctx.rank()), "ncclCommInitRank",
                describe({.rank = ctx.rank(), .peer = ctx.peer(), .op = "NCCL communicator init"}));
    comm_ = comm;
  }

  bool times(Mode, int) const override { return true; }
  // One kernel per call (two in lat), but each also takes room in NCCL's work FIFO, and a full FIFO makes the
  // enqueueing host wait for the GPU: counted double, to stay far from that behind a closed gate.
  int ops_per_iteration(Mode mode) const override { return mode == Mode::Lat ? 4 : 2; }

  void enqueue(P2pContext& ctx, Mode mode, std::size_t bytes, int iterations) override {
    void* stream = ctx.stream().native_handle();
    const int peer = ctx.peer();
    auto send = [&] {
      api_->check(api_->send(ctx.send_buffer(), bytes, kNcclInt8, peer, comm_, stream), "ncclSend",
                  describe({.rank = ctx.rank(), .peer = peer, .op = "ncclSend", .bytes = bytes}), comm_);
    };
    auto recv = [&] {
      api_->check(api_->recv(ctx.recv_buffer(), bytes, kNcclInt8, peer, comm_, stream), "ncclRecv",
                  describe({.rank = ctx.rank(), .peer = peer, .op = "ncclRecv", .bytes = bytes}), comm_);
    };
    auto group = [&](bool start) {
      api_->check(start ? api_->group_start() : api_->group_end(), start ? "ncclGroupStart" : "ncclGroupEnd",
                  describe({.rank = ctx.rank(), .peer = peer, .op = "NCCL send+recv", .bytes = bytes}), comm_);
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

  void abandon() noexcept override { broken_ = true; }

 private:
  std::optional<NcclApi> api_;
  NcclComm comm_ = nullptr;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<P2pBackend> make_nccl_backend() { return std::make_unique<NcclBackend>(); }

}  // namespace pickle::bench
