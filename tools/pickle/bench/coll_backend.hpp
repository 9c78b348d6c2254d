#pragma once
// One implementation of the collectives that `pickle bench coll` and `pickle bench scenario` measure: pickle's
// Communicator or NCCL. The runner owns the buffers, the timing stream and the check; a backend only enqueues calls
// on the timing stream, so that every backend is timed by the same events around the same work.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <pickle/collectives.hpp>

#include "coll_context.hpp"
#include "coll_options.hpp"
#include "core/json.hpp"

namespace pickle::bench {

/// One collective call: NCCL's arguments (count is per rank for allgather, alltoall and reduce_scatter).
struct CollCall {
  Collective coll = Collective::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  DataType type = DataType::F32;
  ReduceOp op = ReduceOp::Sum;  ///< reductions only
  int root = 0;                 ///< broadcast only
};

/// Where the send and receive parts of an in-place call lie in the one buffer, in elements from its start.
struct InPlaceLayout {
  std::size_t send_offset = 0;
  std::size_t recv_offset = 0;
};

class CollBackend {
 public:
  virtual ~CollBackend() = default;
  CollBackend(const CollBackend&) = delete;
  CollBackend& operator=(const CollBackend&) = delete;

  virtual std::string_view name() const noexcept = 0;

  /// Local checks only (no communication): throws UnavailableError when the backend cannot run on this rank (NCCL
  /// without the library or without GPU memory).
  virtual void probe(CollContext& ctx) = 0;
  /// Collective set-up among all ranks (communicators). Called once every rank's probe passed.
  virtual void setup(CollContext& ctx) = 0;
  /// A version or detail worth recording (the NCCL library's version and path); "" when none.
  virtual std::string detail() const { return {}; }

  /// The memory this backend's calls use as buffer `index` of the context (0: send, 1: receive; in place: 1), as
  /// large as ctx.buffer_bytes(): the context's own by default. A backend that needs memory of its own (nccl-zero:
  /// ncclMemAlloc'd and registered as windows) returns that, and the runner loads and checks it there.
  virtual std::byte* buffer(CollContext& ctx, int index) { return ctx.buffer(index); }

  /// The in-place form of `coll` on `rank` with `count` (the call's count): NCCL's convention by default (allgather:
  /// send = recv + rank * count; reduce_scatter: recv = send + rank * count; others send == recv).
  virtual InPlaceLayout in_place_layout(Collective coll, int rank, std::size_t count) const;
  /// Why this backend cannot run `coll` in place; "" when it can.
  virtual std::string in_place_unsupported(Collective) const { return {}; }

  /// Enqueues one call on the context's timing stream: later work on that stream runs after it.
  virtual void enqueue(CollContext& ctx, const CollCall& call) = 0;
  /// Point to point on the timing stream, for the pipeline stages of `pickle bench scenario tp-pp`: `bytes` from
  /// `data` to `peer`, or from `peer` into `data`; later work on the stream runs after it. The i-th send to a peer
  /// matches that peer's i-th receive from this rank.
  virtual void enqueue_send(CollContext& ctx, int peer, const void* data, std::size_t bytes) = 0;
  virtual void enqueue_recv(CollContext& ctx, int peer, void* data, std::size_t bytes) = 0;

  /// Bytes this rank's calls so far copied inside its own memory (pickle: CommStats::local_copy_bytes, SM work on
  /// CUDA); nullopt where the backend does not say (NCCL).
  virtual std::optional<std::uint64_t> local_copy_bytes() const { return std::nullopt; }

  /// Counters of the backend's own worth recording with a run (the software switch's resends and drops); null when
  /// it has none.
  virtual json::Value stats() const { return json::Value(); }

  /// Called instead of a clean shutdown after a failure: release resources without waiting on the peers.
  virtual void abandon() noexcept {}

 protected:
  CollBackend() = default;
};

/// The backend called `name` ("pickle", "nccl", "nccl-zero", "switch"). Constructing one does nothing that can
/// fail. `key` names this instance's keys in the store (a run that creates several instances of a backend gives each
/// its own).
std::unique_ptr<CollBackend> make_coll_backend(std::string_view name, const std::string& key);

std::unique_ptr<CollBackend> make_pickle_coll_backend(const std::string& key);
/// Seed 002's software switch: int32 sum allreduces aggregated by SwitchML's protocol on a thread of rank 0.
std::unique_ptr<CollBackend> make_switch_coll_backend(const std::string& key);
/// NCCL as it comes ("nccl"), or in its zero-SM mode ("nccl-zero": CTAPolicy = NCCL_CTA_POLICY_ZERO, buffers from
/// ncclMemAlloc registered with NCCL_WIN_COLL_SYMMETRIC), the anchors' strongest NCCL for allgather.
std::unique_ptr<CollBackend> make_nccl_coll_backend(const std::string& key, bool zero_cta = false);

}  // namespace pickle::bench
