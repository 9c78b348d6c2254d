// broadcast: the root's copy engine writes its buffer straight into every peer's recv buffer (no SM). Non-root ranks
// ignore `send`. Across hosts (ranks on several hosts, the same number on each) it goes in two levels instead.
#include <algorithm>
#include <vector>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/plumbing.hpp"
#include "collectives/two_levels.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {
namespace {

/// Two levels, for ranks on several hosts (docs/collectives.md, "Across hosts: two levels"): the root sends to the
/// ranks of its local index on the other hosts (the network carries the buffer once per host), then each of those
/// broadcasts to its host's ranks (copy engines).
void broadcast_in_two_levels(Communicator::Impl::HostGroups& groups, Stream& stream, const OpContext& ctx,
                             const void* send, void* recv, std::size_t count, DataType type, int root) {
  const int root_index = groups.index_of[static_cast<std::size_t>(root)];
  if (groups.host.rank() == root_index) {
    // This rank's across group is the root's: the root is its member on the root's host.
    const auto& across = groups.across_ranks;
    const int root_in_across = static_cast<int>(std::find(across.begin(), across.end(), root) - across.begin());
    coll::across_hosts(groups, ctx, [&] { groups.across.broadcast(stream, send, recv, count, type, root_in_across); });
  }
  coll::on_host(groups, ctx, [&] { groups.host.broadcast(stream, recv, recv, count, type, root_index); });
}

}  // namespace

void Communicator::broadcast(Stream& stream, const void* send, void* recv, std::size_t count, DataType type,
                             int root) {
  Impl& c = *impl_;
  coll::NumberedCall numbered(c);  // first: every rank numbers every call, whatever it then runs
  const int rank = c.info.rank, world = c.info.world_size;
  OpContext ctx{.rank = rank, .op = "broadcast"};
  ctx.bytes = coll::checked_bytes(ctx, count, type, 1);
  const std::size_t bytes = ctx.bytes;
  if (root < 0 || root >= world) {
    throw InvalidArgument(cat(describe(ctx), ": root ", root, " is not a rank of this communicator (world size ",
                              world, ")"));
  }
  coll::check_stream(c, ctx, stream);
  if (bytes == 0) return;
  coll::check_buffer(c, ctx, recv, bytes, "recv");
  if (rank == root) {
    coll::check_buffer(c, ctx, send, bytes, "send");
    if (send != recv && coll::overlaps(send, bytes, recv, bytes)) {
      throw InvalidArgument(cat(describe(ctx), ": send and recv overlap without being the same buffer (in-place "
                                               "is send == recv)"));
    }
  }
  Impl::HostGroups* groups = coll::two_level_groups(c, ctx);
  if (groups != nullptr) return broadcast_in_two_levels(*groups, stream, ctx, send, recv, count, type, root);
  coll::run_collective(c, stream, ctx, [&](coll::Call& call) {
    // The root writes straight into the peers' recv, each only once that peer's stream has reached the call.
    if (rank == root) {
      std::vector<Request> ready(static_cast<std::size_t>(world));
      for (int peer = 0; peer < world; ++peer) {
        if (peer != rank) ready[static_cast<std::size_t>(peer)] = call.post_ready_message(peer);
      }
      for (int peer = 0; peer < world; ++peer) {
        if (peer == rank) continue;
        call.await_ready_message(peer, ready[static_cast<std::size_t>(peer)]);
        call.send(peer, coll::kTagBroadcast, send, bytes);
      }
      if (send != recv) call.copy_local(recv, send, bytes);
    } else {
      call.stream_wait_later(call.recv(root, coll::kTagBroadcast, recv, bytes));
      call.send_ready_message(root);
    }
    call.finish();
  });
}

}  // namespace pickle
