#pragma once
// The inside of a Rail (rail.hpp): its posted operations, lanes and per-peer state. Only rail.cpp and
// rail_progress.cpp include it.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "transport/net/rail.hpp"

namespace pickle::transport::net {

enum class OpKind : std::uint8_t { Write, Receive };

/// Where a peer's endpoints on this rail are. Open -> Draining (the peer failed: nothing is posted, the queue is
/// read and its completions discarded until quiet) -> Closed (endpoints and queue closed, rail_closed called).
enum class PeerPhase : std::uint8_t { Open, Draining, Closed };

/// The context of one posted operation. `context` comes first: providers that set FI_CONTEXT/FI_CONTEXT2 use the
/// memory op_context points to while the operation is pending, and op_context is this object's address.
struct Rail::PostedOp {
  fi_context2 context{};
  OpKind kind = OpKind::Write;
  int lane = 0;
  std::shared_ptr<OutMessage> message;  // Write: the message this chunk belongs to
  std::size_t bytes = 0;                // Write: this chunk's length
};

/// One endpoint towards a peer. Never moved once posting starts: the provider holds pointers into its op pools.
struct Rail::Lane {
  Endpoint endpoint;
  fi_addr_t remote = FI_ADDR_UNSPEC;  // the peer's endpoint of this lane that pairs with ours (its landing one
                                      // for a sending endpoint, its sending one for a landing endpoint)
  std::vector<PostedOp> write_ops;    // inflight_per_lane contexts
  std::vector<PostedOp*> free_ops;
  std::vector<PostedOp> receive_ops;  // zero-length receives for FI_RX_CQ_DATA providers
  std::vector<PostedOp*> to_repost;   // receives whose repost met -FI_EAGAIN
};

struct Rail::PeerRail {
  int rank = -1;
  // Declared before `lanes`: endpoints close before the queue they are bound to.
  CompletionQueue cq;
  int cq_fd = -1;  // FI_WAIT_FD of cq, owned by it; -1 without one
  std::vector<Lane> lanes;
  std::deque<Stripe> to_post;   // thread only
  unsigned next_lane = 0;       // thread only
  PeerPhase phase = PeerPhase::Open;  // thread only (or after the thread stopped)
  std::int64_t quiet_until_ns = 0;    // Draining: close once nothing was read from the queue until then
  std::int64_t quiet_ns = 0;          // Draining: how long the queue must stay empty (rail_close.cpp)
  std::int64_t drain_limit_ns = 0;    // Draining: close by then even if completions keep coming
  std::vector<Stripe> incoming;  // from submit(), guarded by inbox_mutex_
  bool accepting = true;         // guarded by inbox_mutex_: false once closed, so that submit() drops new stripes
};

}  // namespace pickle::transport::net
