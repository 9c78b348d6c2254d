#pragma once
// The background of `pickle bench interference`: one rank's side of a traffic pattern (p2p: rank 0 sends, rank 1
// receives; allgather: every rank of it gathers) through one backend (pickle's Communicator, NCCL, or the raw copy
// engine for p2p). A Traffic only posts messages and says whether the oldest one finished; TrafficRunner
// (interference_runner.hpp) keeps a ring of them in flight from its own thread and times their completions.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <pickle/bootstrap.hpp>
#include <pickle/memory.hpp>

namespace pickle::bench {

/// A rank's background buffers: allocated once before any backend runs (interference_rank.cpp), and the ones that
/// every post() of the run passes. Null (0 bytes) where the rank has none: p2p's sender receives nothing, its
/// receiver sends nothing.
struct TrafficBuffers {
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t send_bytes = 0;
  std::size_t recv_bytes = 0;
};

class Traffic {
 public:
  virtual ~Traffic() = default;
  Traffic(const Traffic&) = delete;
  Traffic& operator=(const Traffic&) = delete;

  virtual std::string_view background() const noexcept = 0;  ///< "p2p", "allgather"
  virtual std::string_view backend() const noexcept = 0;     ///< "pickle", "nccl", "ce"

  /// Local checks only: UnavailableError when this rank cannot run the backend (no NCCL, ranks sharing a GPU for
  /// NCCL, no collective in this build, a pattern the backend does not have).
  virtual void probe() = 0;
  /// Collective set-up between the ranks taking part (`rank` is this one's; `device` its GPU; `buffers` the ones
  /// every post() will pass, for a backend that maps the peer's memory once). Called once every probe passed.
  virtual void setup(Store& store, int rank, int device, const TrafficBuffers& buffers) = 0;
  /// The library that runs (NCCL's version and path); "" when there is nothing to say.
  virtual std::string detail() const { return {}; }

  /// From the runner's thread: posts this rank's part of the next message of `bytes` (a send from `send`, a receive
  /// into `recv`, or a collective over both). Messages complete in the order they were posted.
  virtual void post(const void* send, void* recv, std::size_t bytes) = 0;
  /// Whether the oldest posted message that is not yet retired has completed, without blocking. Rethrows its error.
  virtual bool oldest_done() = 0;
  /// Forgets the oldest message (oldest_done() returned true for it).
  virtual void retire_oldest() = 0;

  /// After a failure: give up outstanding messages without waiting for the peer (NCCL: abort the communicator).
  virtual void abandon() noexcept {}

 protected:
  Traffic() = default;
};

/// The ranks a Traffic runs between: ranks 0 .. ranks-1 of the job (2 for p2p), `local_ranks` of them on this host,
/// for telling whether they share a GPU.
struct TrafficRanks {
  int ranks = 2;
  int local_ranks = 2;
};

/// The traffic of `background` ("p2p", "allgather") through `backend` ("pickle", "nccl", "ce") between `ranks`.
/// Constructing one does nothing that can fail.
std::unique_ptr<Traffic> make_traffic(std::string_view background, std::string_view backend, TrafficRanks ranks);

std::unique_ptr<Traffic> make_pickle_traffic(std::string_view background, TrafficRanks ranks);
std::unique_ptr<Traffic> make_nccl_traffic(std::string_view background, TrafficRanks ranks);
/// The raw copy engine (interference_traffic_ce.cpp) on memory of `kind`: the bench's is always GPU memory; the tests
/// run it on host memory, where the host stream's memcpy stands in for the copy engine.
std::unique_ptr<Traffic> make_ce_traffic(std::string_view background, TrafficRanks ranks,
                                         MemoryKind kind = MemoryKind::Cuda);

}  // namespace pickle::bench
