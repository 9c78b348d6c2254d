// NCCL's side of the background: ncclSend/ncclRecv (p2p) or ncclAllGather on a stream of this rank, an event after
// each message to time its completion. NCCL moves the data with kernels, so on the receiving GPU its thread blocks
// share the SMs with the foreground: the effect the suite measures. libnccl.so.2 is loaded at run time (NcclSession);
// the communicator of the ranks taking part (2 for p2p, N for allgather) is bootstrapped through pickle's store, as in
// `pickle bench p2p`.
#include <optional>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "cuda_device.hpp"
#include "interference_cuda.hpp"
#include "interference_traffic.hpp"
#include "nccl_session.hpp"

namespace pickle::bench {
namespace {

class NcclTraffic final : public Traffic {
 public:
  NcclTraffic(std::string_view background, TrafficRanks ranks) : background_(background), ranks_(ranks) {}

  ~NcclTraffic() override {
    events_.reset();
    nccl_.close();
    stream_.reset();  // after the communicator: NCCL's work on it is over
  }

  std::string_view background() const noexcept override { return background_; }
  std::string_view backend() const noexcept override { return "nccl"; }

  void probe() override {
    // Before loading NCCL: ranks on one GPU are a fact of the run, whatever NCCL this machine has.
    if (auto problem = nccl_gpu_sharing_problem(ranks_.local_ranks, "--share-gpus"); !problem.empty()) {
      throw UnavailableError(problem);
    }
    nccl_.load();
  }

  std::string detail() const override { return nccl_.detail(); }

  void setup(Store& store, int rank, int device, const TrafficBuffers&) override {
    rank_ = rank;
    const std::string key = cat("bench/interference/nccl/", background_, "/unique-id");
    const NcclUniqueId id = nccl_.share_unique_id(store, key, rank);
    (void)device;  // the caller made it current: NCCL takes the current device at init
    const int peer = p2p() ? 1 - rank : -1;
    stream_.emplace(cat(describe({.rank = rank, .op = "NCCL background stream"})));
    events_.emplace(cat(describe({.rank = rank, .peer = peer, .op = cat("NCCL ", background_, " background")})));
    nccl_.init(id, ranks_.ranks, rank,
               describe({.rank = rank, .peer = peer, .op = cat("NCCL communicator init (", ranks_.ranks, " ranks)")}));
  }

  void post(const void* send, void* recv, std::size_t bytes) override {
    void* stream = stream_->get();
    const int peer = 1 - rank_;
    const NcclApi& api = nccl_.api();
    NcclComm comm = nccl_.comm();
    if (p2p()) {
      if (rank_ == 0) {
        api.check(api.send(send, bytes, kNcclInt8, peer, comm, stream), "ncclSend",
                  describe({.rank = rank_, .peer = peer, .op = "ncclSend (background)", .bytes = bytes}), comm);
      } else {
        api.check(api.recv(recv, bytes, kNcclInt8, peer, comm, stream), "ncclRecv",
                  describe({.rank = rank_, .peer = peer, .op = "ncclRecv (background)", .bytes = bytes}), comm);
      }
    } else {
      // `bytes` is the gathered total: each rank contributes its share.
      const std::size_t share = bytes / static_cast<std::size_t>(ranks_.ranks);
      api.check(api.all_gather(send, recv, share, kNcclInt8, comm, stream), "ncclAllGather",
                describe({.rank = rank_, .op = cat("ncclAllGather of ", ranks_.ranks, " ranks (background)"),
                          .bytes = bytes}),
                comm);
    }
    events_->record(stream_->get());
  }

  bool oldest_done() override { return events_->oldest_done(); }
  void retire_oldest() override { events_->retire_oldest(); }
  void abandon() noexcept override { nccl_.abandon(); }

 private:
  bool p2p() const noexcept { return background_ == "p2p"; }

  std::string background_;
  TrafficRanks ranks_;
  int rank_ = -1;
  NcclSession nccl_;  // before the stream and events, which the destructor drops in its own order
  std::optional<cuda::StreamHandle> stream_;
  std::optional<cuda::EventQueue> events_;
};

}  // namespace

std::unique_ptr<Traffic> make_nccl_traffic(std::string_view background, TrafficRanks ranks) {
  return std::make_unique<NcclTraffic>(background, ranks);
}

}  // namespace pickle::bench
