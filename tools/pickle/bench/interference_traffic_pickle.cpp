// pickle's side of the background: Communicator send/recv between ranks 0 and 1 (copy engine into the peer's
// mapped memory, a stream write-value as completion: no kernel on either GPU), and Communicator::allgather where
// this build has it. The Communicator is one of the ranks taking part (ranks 0 and 1 for p2p, ranks 0 .. N-1 for
// allgather) on a port that rank 0 picks (connect_bench_communicator), as in `pickle bench p2p`. Ranks that share a
// GPU (--share-gpus) run too: pickle's collectives work between processes of one GPU (tests/cuda/test_coll_cuda.cpp
// runs three ranks on two GPUs).
#include <deque>
#include <optional>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>
#include <pickle/stream.hpp>

#include "bench_communicator.hpp"
#include "core/format.hpp"
#include "interference_cuda.hpp"
#include "interference_traffic.hpp"

// Communicator::allgather comes from the collectives layer (src/collectives); bench/CMakeLists.txt defines
// PICKLE_BENCH_PICKLE_ALLGATHER=1 when that layer is in the tree. Without it, the pickle allgather background reports
// itself unavailable.
#ifndef PICKLE_BENCH_PICKLE_ALLGATHER
#define PICKLE_BENCH_PICKLE_ALLGATHER 0
#endif

namespace pickle::bench {
namespace {

constexpr int kTag = 41;  // any tag: this communicator carries nothing else

class PickleTraffic final : public Traffic {
 public:
  PickleTraffic(std::string_view background, TrafficRanks ranks) : background_(background), ranks_(ranks) {}

  ~PickleTraffic() override {
    // Requests go before their communicator; a collective's stream is drained before the communicator it used.
    requests_.clear();
    if (stream_) {
      try {
        stream_->synchronize();
      } catch (const Error&) {
        // Bounded by PICKLE_TIMEOUT; after a failure the communicator's teardown releases what is left.
      }
    }
  }

  std::string_view background() const noexcept override { return background_; }
  std::string_view backend() const noexcept override { return "pickle"; }

  void probe() override {
    if (background_ == "allgather" && !PICKLE_BENCH_PICKLE_ALLGATHER) {
      throw UnavailableError(
          "pickle's Communicator::allgather is not in this build (src/collectives is missing)");
    }
  }

  void setup(Store& store, int rank, int device, const TrafficBuffers&) override {
    rank_ = rank;
    // All of the job's ranks: 0, so that the communicator keeps the job's own host layout; a subset: one host's.
    const int ranks = ranks_.ranks == store.self().world_size ? 0 : ranks_.ranks;
    comm_.emplace(connect_bench_communicator(store, MemoryKind::Cuda, device,
                                             cat("bench/interference/pickle/", background_, "/port"), ranks));
    if (background_ == "allgather") {
      stream_.emplace(comm_->make_stream());
      events_.emplace(cat(describe({.rank = rank, .op = "pickle allgather background"})));
    }
  }

  void post(const void* send, void* recv, std::size_t bytes) override {
    if (background_ == "p2p") {
      requests_.push_back(rank_ == 0 ? comm_->send(1, kTag, send, bytes) : comm_->recv(0, kTag, recv, bytes));
      return;
    }
#if PICKLE_BENCH_PICKLE_ALLGATHER
    // `bytes` is the gathered total: each rank contributes its share.
    comm_->allgather(*stream_, send, recv, bytes / static_cast<std::size_t>(ranks_.ranks), DataType::U8);
    events_->record(static_cast<cudaStream_t>(stream_->native_handle()));
#else
    (void)send;
    (void)recv;
    throw UnavailableError(cat("pickle allgather of ", bytes, " bytes: not in this build"));
#endif
  }

  bool oldest_done() override { return events_ ? events_->oldest_done() : requests_.front().test(); }

  void retire_oldest() override {
    if (events_) {
      events_->retire_oldest();
    } else {
      requests_.pop_front();
    }
  }

 private:
  std::string background_;
  TrafficRanks ranks_;
  int rank_ = -1;
  std::optional<Communicator> comm_;     // declared first: destroyed last
  std::optional<Stream> stream_;
  std::optional<cuda::EventQueue> events_;
  std::deque<Request> requests_;
};

}  // namespace

std::unique_ptr<Traffic> make_pickle_traffic(std::string_view background, TrafficRanks ranks) {
  return std::make_unique<PickleTraffic>(background, ranks);
}

}  // namespace pickle::bench
