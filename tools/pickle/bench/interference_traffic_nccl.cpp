// NCCL's side of the background: ncclSend/ncclRecv (p2p) or ncclAllGather on a stream of this rank, an event after
// each message to time its completion. NCCL moves the data with kernels, so on the receiving GPU its thread blocks
// share the SMs with the foreground: the effect the suite measures. libnccl.so.2 is loaded at run time (NcclApi);
// the 2-rank communicator is bootstrapped through pickle's store, as in `pickle bench p2p`.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "interference_cuda.hpp"
#include "interference_traffic.hpp"
#include "nccl_api.hpp"

namespace pickle::bench {
namespace {

/// ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream), from nccl.h.
using AllGatherFn = int(const void*, void*, std::size_t, int, NcclComm, void*);

class NcclTraffic final : public Traffic {
 public:
  explicit NcclTraffic(std::string_view background) : background_(background) {}

  ~NcclTraffic() override {
    events_.reset();
    if (comm_ != nullptr) {
      // Destroy waits for NCCL's work to drain; after a failure the peer may never answer, so abort instead.
      int result = broken_ ? api_->comm_abort(comm_) : api_->comm_destroy(comm_);
      if (result != 0) PICKLE_LOG(Warn, "bench", "NCCL communicator teardown returned " << result);
    }
    stream_.reset();  // after the communicator: NCCL's work on it is over
  }

  std::string_view background() const noexcept override { return background_; }
  std::string_view backend() const noexcept override { return "nccl"; }

  void probe() override {
    // NVLink multicast (NVLS) must stay off on the machines we measure on; NCCL reads this at init.
    auto nvls = env::foreign("NCCL_NVLS_ENABLE");
    if (nvls && *nvls != "0") PICKLE_LOG(Warn, "bench", "NCCL_NVLS_ENABLE=" << *nvls << " overridden to 0");
    if (setenv("NCCL_NVLS_ENABLE", "0", 1) != 0) throw SystemError("setenv NCCL_NVLS_ENABLE", errno);
    api_.emplace(NcclApi::load());
    if (background_ == "allgather") {
      // NcclApi covers send/recv; the collective's symbol comes from the same file (dlopen returns the same handle).
      gather_library_.emplace(DynamicLibrary::open(api_->path()));
      all_gather_ = gather_library_->symbol<AllGatherFn>("ncclAllGather");
    }
  }

  std::string detail() const override {
    return api_ ? cat("NCCL ", api_->version(), " (", api_->path(), ")") : std::string();
  }

  void setup(Store& store, int rank, int device) override {
    rank_ = rank;
    const std::string key = cat("bench/interference/nccl/", background_, "/unique-id");
    NcclUniqueId id{};
    if (rank == 0) {
      // The key is always set, with the id or the reason there is none, so that rank 1 never waits in vain.
      try {
        api_->check(api_->get_unique_id(&id), "ncclGetUniqueId", describe({.rank = 0, .op = "NCCL bootstrap"}));
      } catch (const Error& e) {
        store.set(key, std::string("E") + e.what());
        throw;
      }
      store.set(key, std::string("I") + std::string(id.internal, sizeof id.internal));
    } else {
      std::string blob = store.get_string(key);
      if (blob.empty() || blob[0] != 'I' || blob.size() != 1 + sizeof id.internal) {
        throw PeerError(cat(describe({.rank = rank, .peer = 0, .op = "NCCL bootstrap"}),
                            ": rank 0 has no NCCL id: ", blob.empty() ? std::string() : blob.substr(1)),
                        0);
      }
      std::memcpy(id.internal, blob.data() + 1, sizeof id.internal);
    }
    (void)device;  // the caller made it current: NCCL takes the current device at init
    stream_.emplace(cat(describe({.rank = rank, .op = "NCCL background stream"})));
    events_.emplace(cat(describe({.rank = rank, .peer = 1 - rank, .op = cat("NCCL ", background_, " background")})));
    NcclComm comm = nullptr;  // kept only once init succeeded: a failed init leaves nothing to tear down
    api_->check(api_->comm_init_rank(&comm, 2, id, rank), "ncclCommInitRank",
                describe({.rank = rank, .peer = 1 - rank, .op = "NCCL communicator init"}));
    comm_ = comm;
  }

  void post(const void* send, void* recv, std::size_t bytes) override {
    void* stream = stream_->get();
    const int peer = 1 - rank_;
    if (background_ == "p2p") {
      if (rank_ == 0) {
        api_->check(api_->send(send, bytes, kNcclInt8, peer, comm_, stream), "ncclSend",
                    describe({.rank = rank_, .peer = peer, .op = "ncclSend (background)", .bytes = bytes}), comm_);
      } else {
        api_->check(api_->recv(recv, bytes, kNcclInt8, peer, comm_, stream), "ncclRecv",
                    describe({.rank = rank_, .peer = peer, .op = "ncclRecv (background)", .bytes = bytes}), comm_);
      }
    } else {
      api_->check(all_gather_(send, recv, bytes / 2, kNcclInt8, comm_, stream), "ncclAllGather",
                  describe({.rank = rank_, .op = "ncclAllGather (background)", .bytes = bytes}), comm_);
    }
    events_->record(stream_->get());
  }

  bool oldest_done() override { return events_->oldest_done(); }
  void retire_oldest() override { events_->retire_oldest(); }
  void abandon() noexcept override { broken_ = true; }

 private:
  std::string background_;
  int rank_ = -1;
  std::optional<NcclApi> api_;
  std::optional<DynamicLibrary> gather_library_;
  AllGatherFn* all_gather_ = nullptr;
  std::optional<cuda::StreamHandle> stream_;
  std::optional<cuda::EventQueue> events_;
  NcclComm comm_ = nullptr;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<Traffic> make_nccl_traffic(std::string_view background) {
  return std::make_unique<NcclTraffic>(background);
}

}  // namespace pickle::bench
