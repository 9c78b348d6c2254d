#pragma once
// One way of moving the benchmark's messages between ranks 0 and 1: the raw copy engine (ce), NCCL, or pickle's
// Communicator. The runner owns the buffers, the timing stream, the gate and the check; a backend only enqueues
// iterations of a mode on the timing stream (or on its own streams, joined back into the timing stream), so that
// every backend is timed by the same events around the same work.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <pickle/communicator.hpp>

#include "p2p_context.hpp"
#include "p2p_options.hpp"

namespace pickle::bench {

class P2pBackend {
 public:
  virtual ~P2pBackend() = default;
  P2pBackend(const P2pBackend&) = delete;
  P2pBackend& operator=(const P2pBackend&) = delete;

  virtual std::string_view name() const noexcept = 0;

  /// Local checks only (no communication): throws UnavailableError when the backend cannot run on this rank, for
  /// instance NCCL without the library or without GPU memory. Called on ranks 0 and 1.
  virtual void probe(P2pContext& ctx) = 0;
  /// Collective set-up between ranks 0 and 1 (communicators, connections). Called once every rank's probe passed.
  virtual void setup(P2pContext& ctx) = 0;
  /// A version or detail worth recording (the NCCL library's version and path); "" when none.
  virtual std::string detail() const { return {}; }

  /// Whether `rank`'s timing stream carries work in `mode`, so that its events time something.
  virtual bool times(Mode mode, int rank) const = 0;
  /// An upper bound on the stream operations one iteration enqueues on any rank: the runner holds at most a few
  /// hundred operations behind the gate, since a CUDA stream whose queue is full blocks the host that enqueues.
  virtual int ops_per_iteration(Mode mode) const = 0;
  /// Enqueues `iterations` iterations of `mode` with messages of `bytes`: the send buffer into the peer's receive
  /// buffer. When it returns, the timing stream's later work runs after this rank's part of those iterations.
  virtual void enqueue(P2pContext& ctx, Mode mode, std::size_t bytes, int iterations) = 0;

  /// Called instead of a clean shutdown after a failure: release resources without waiting on the peer.
  virtual void abandon() noexcept {}

  /// Peer allocations this rank has mapped so far (pickle's stats().ipc.ipc_opens), for backends that count them:
  /// the runner records how many happened while timing (the steady state must open nothing).
  virtual std::optional<std::uint64_t> mapping_opens() const { return std::nullopt; }
  /// Sends whose completion write went to a completion lane so far (pickle's stats().ipc.completion_lane_writes):
  /// the runner records how many did while timing.
  virtual std::optional<std::uint64_t> completion_lane_writes() const { return std::nullopt; }

 protected:
  P2pBackend() = default;
};

/// The backend called `name` ("ce", "nccl", "pickle"). Constructing one does nothing that can fail.
std::unique_ptr<P2pBackend> make_backend(std::string_view name);

std::unique_ptr<P2pBackend> make_ce_backend();
std::unique_ptr<P2pBackend> make_nccl_backend();
std::unique_ptr<P2pBackend> make_pickle_backend();

}  // namespace pickle::bench
