// The raw copy-engine ceiling: plain stream copies from this rank's send buffer into the peer's receive buffer,
// mapped into this process once (device::export_memory / import_memory). On CUDA these are cudaMemcpyAsync peer
// copies over NVLink or PCIe; on host memory, memcpy by the host stream. Latency is a ping-pong of copy + flag
// write-value, answered by the peer's wait-value + copy + write-value: stream operations only, no host in the loop.
#include <pickle/error.hpp>

#include "backend.hpp"

namespace pickle::bench {
namespace {

class CeBackend final : public P2pBackend {
 public:
  std::string_view name() const noexcept override { return "ce"; }

  void probe(P2pContext& ctx) override {
    if (ctx.peer_recv_buffer() == nullptr) {
      throw UnavailableError("ce: the peer's receive buffer is not mapped: ranks 0 and 1 are on different hosts, and "
                             "no copy engine reaches another host's memory");
    }
  }
  void setup(P2pContext&) override {}

  bool times(Mode mode, int rank) const override { return mode != Mode::Uni || rank == 0; }
  int ops_per_iteration(Mode mode) const override { return mode == Mode::Lat ? 3 : 1; }

  void enqueue(P2pContext& ctx, Mode mode, std::size_t bytes, int iterations) override {
    device::Stream& stream = ctx.stream();
    switch (mode) {
      case Mode::Uni:
        if (ctx.rank() != 0) return;
        [[fallthrough]];
      case Mode::Bi:
        for (int i = 0; i < iterations; ++i) stream.copy(ctx.peer_recv_buffer(), ctx.send_buffer(), bytes);
        return;
      case Mode::Lat:
        for (int i = 0; i < iterations; ++i) {
          // Rank 0 serves first; rank 1 answers each message once its flag says the message is complete.
          if (ctx.rank() == 1) stream.wait_value(ctx.my_ping(), ctx.next_ping_in());
          stream.copy(ctx.peer_recv_buffer(), ctx.send_buffer(), bytes);
          stream.write_value(ctx.peer_ping(), ctx.next_ping_out());
          if (ctx.rank() == 0) stream.wait_value(ctx.my_ping(), ctx.next_ping_in());
        }
        return;
    }
  }
};

}  // namespace

std::unique_ptr<P2pBackend> make_ce_backend() { return std::make_unique<CeBackend>(); }

}  // namespace pickle::bench
