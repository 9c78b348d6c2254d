// pickle itself: Communicator send/recv between ranks 0 and 1, on the same buffers as the other backends. Receives
// are posted first and the sender waits until it has heard of them; the sends are then ordered after the timing
// stream (send(..., after)), so they wait behind the gate like everything else, and the timing stream waits for
// their completion (Request::on_stream): copy engine into the peer's memory and a stream write-value of the
// completion word, no kernel and no host in the timed path.
//
// The Communicator brings its own store; it gets a 2-rank RankInfo (ranks 0 and 1 of this job) on a fresh port that
// rank 0 picks, so that the benchmark's store and extra ranks stay out of it.
#include <algorithm>
#include <optional>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>
#include <pickle/stream.hpp>

#include "backend.hpp"
#include "bench_communicator.hpp"
#include "comm/net_pieces.hpp"
#include "core/clock.hpp"
#include "core/format.hpp"
#include "device/host/backoff.hpp"

namespace pickle::bench {
namespace {

constexpr const char* kPortKey = "bench/p2p/pickle/port";

/// Receives posted ahead of the sends, at most: completion slots are 4096 per peer, and none frees while the timing
/// stream waits behind the gate. Iterations past it post their receive in turn (and may be matched late).
constexpr int kPostAhead = 1024;

/// One tag per mode: a mode's sends and receives always pair up, but separate tags keep the modes apart anyway.
int tag_of(Mode mode) { return 1 + static_cast<int>(mode); }

class PickleBackend final : public P2pBackend {
 public:
  std::string_view name() const noexcept override { return "pickle"; }

  void probe(P2pContext&) override {}

  void setup(P2pContext& ctx) override {
    comm_.emplace(connect_pair_communicator(ctx.store(), ctx.kind(), ctx.device(), kPortKey));
    timing_.emplace(ctx.stream_handle());
  }

  bool times(Mode, int) const override { return true; }
  // Send: event record on the timing stream; wait, copy, write-value, record on the copy stream; the timing
  // stream's wait on completion and the event record of its check (Request::on_stream). Lat adds the receive's wait
  // and check. Over net a send goes in up to kMaxNetPieces pieces
  // of a host callback each, and a copy before it when staged (GPU memory; comm/net_pieces.hpp), so that ten 256 MiB
  // messages behind the gate were 1920 operations before the pieces were capped.
  int ops_per_iteration(Mode) const override {
    const bool net = comm_ && comm_->transport(1 - comm_->rank()) == "net";
    return 9 + (net ? static_cast<int>(comm::kMaxNetPieces) * comm::kStreamOpsPerNetPiece : 0);
  }

  void enqueue(P2pContext& ctx, Mode mode, std::size_t bytes, int iterations) override {
    const int peer = ctx.peer(), tag = tag_of(mode);
    Stream& timing = *timing_;
    const bool receives = mode != Mode::Uni || ctx.rank() == 1;
    const bool sends = mode != Mode::Uni || ctx.rank() == 0;
    auto send = [&] { return comm_->send(peer, tag, ctx.send_buffer(), bytes, &timing); };
    auto recv = [&] { return comm_->recv(peer, tag, ctx.recv_buffer(), bytes); };

    // The receiver is ready, as latency is measured everywhere: every receive is posted, and the sender has heard
    // of it, before the first send. Each send then matches at call time and joins the timing stream (a copy and a
    // write-value). A send that beats its receive's post would wait for the post on the host and go out from a copy
    // stream: the host's matching would be timed, not the link (4 KiB one way: 10.6-11.6 against 5.8 us,
    // docs/results/2026-11-24-h100x1.md).
    const int ahead = std::min(iterations, kPostAhead);
    std::vector<Request> recvs;
    for (int i = 0; receives && i < ahead; ++i) recvs.push_back(recv());
    if (sends) wait_for_posts(ctx, peer, tag, static_cast<std::size_t>(ahead));
    auto recv_at = [&](int i) { return i < ahead ? recvs[static_cast<std::size_t>(i)] : recv(); };

    switch (mode) {
      case Mode::Uni:
      case Mode::Bi: {
        std::vector<Request> requests;
        for (int i = 0; receives && i < iterations; ++i) requests.push_back(recv_at(i));
        for (int i = 0; sends && i < iterations; ++i) requests.push_back(send());
        // The timing stream's stop event comes after every message of this rank, sent or received.
        for (auto& request : requests) request.on_stream(timing);
        return;
      }
      case Mode::Lat: {
        Request last_send;
        for (int i = 0; i < iterations; ++i) {
          if (ctx.rank() == 0) {
            last_send = send();
            recv_at(i).on_stream(timing);  // the next send leaves only once the answer is here
          } else {
            recv_at(i).on_stream(timing);
            last_send = send();  // after=timing: leaves once the message above has arrived
          }
        }
        // Rank 1's last answer is not otherwise waited for by its own timing stream, and the send buffer is
        // rewritten before the next repeat.
        last_send.on_stream(timing);
        return;
      }
    }
  }

  /// The transport of the pair (ipc, or shm when peer access is missing or PICKLE_TRANSPORT=shm forces it).
  std::string detail() const override { return comm_ ? cat("transport ", comm_->transport(1 - comm_->rank())) : ""; }

  std::optional<std::uint64_t> mapping_opens() const override {
    if (!comm_) return std::nullopt;
    return comm_->stats().ipc.ipc_opens;
  }

  std::optional<std::uint64_t> completion_lane_writes() const override {
    if (!comm_) return std::nullopt;
    return comm_->stats().ipc.completion_lane_writes;
  }

 private:
  /// Until `peer`'s first `count` receives on `tag` are heard of here (bounded by the communicator's timeout).
  void wait_for_posts(P2pContext& ctx, int peer, int tag, std::size_t count) {
    const double seconds = ctx.store().timeout_seconds();
    Deadline deadline = Deadline::after_seconds(seconds);
    device::host::Backoff backoff;  // spin, yield, then sleep: the peer may need this core (2-core CI machines)
    while (comm_->posted_receives(peer, tag) < count) {
      if (deadline.expired()) {
        throw TimeoutError(cat(describe({.rank = ctx.rank(), .peer = peer, .op = "bench p2p pickle: waiting for the "
                                         "peer's receives"}),
                               ": heard of ", comm_->posted_receives(peer, tag), " of ", count, " after ", seconds,
                               " s"));
      }
      backoff.pause();
    }
  }

  std::optional<Communicator> comm_;
  std::optional<Stream> timing_;
};

}  // namespace

std::unique_ptr<P2pBackend> make_pickle_backend() { return std::make_unique<PickleBackend>(); }

}  // namespace pickle::bench
