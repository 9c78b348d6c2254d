#pragma once
// The background of `pickle bench interference`: one rank's side of a traffic pattern (p2p: rank 0 sends, rank 1
// receives; allgather: both gather) through one backend (pickle's Communicator or NCCL). A Traffic only posts
// messages and says whether the oldest one finished; TrafficRunner (interference_runner.hpp) keeps a ring of them
// in flight from its own thread and times their completions.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <pickle/bootstrap.hpp>

namespace pickle::bench {

class Traffic {
 public:
  virtual ~Traffic() = default;
  Traffic(const Traffic&) = delete;
  Traffic& operator=(const Traffic&) = delete;

  virtual std::string_view background() const noexcept = 0;  ///< "p2p", "allgather"
  virtual std::string_view backend() const noexcept = 0;     ///< "pickle", "nccl"

  /// Local checks only: UnavailableError when this rank cannot run the backend (no NCCL, no collective yet).
  virtual void probe() = 0;
  /// Collective set-up between ranks 0 and 1 (`rank` is this one's; `device` its GPU). Called once every probe passed.
  virtual void setup(Store& store, int rank, int device) = 0;
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

/// The traffic of `background` ("p2p", "allgather") through `backend` ("pickle", "nccl"). Constructing one does
/// nothing that can fail.
std::unique_ptr<Traffic> make_traffic(std::string_view background, std::string_view backend);

std::unique_ptr<Traffic> make_pickle_traffic(std::string_view background);
std::unique_ptr<Traffic> make_nccl_traffic(std::string_view background);

}  // namespace pickle::bench
