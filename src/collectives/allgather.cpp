// allgather: every rank's part goes by copy engine straight into its slot of every peer's recv buffer (no scratch,
// no SM); the rank's own part is a local copy unless it is already in place (or, with PICKLE_ALLGATHER_OWN_COPY=relay,
// comes back from rank + 1 by copy engine). Across hosts (ranks on several hosts, the same number on each) it goes in
// two levels instead: see allgather_in_two_levels.
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/placed.hpp"
#include "collectives/plumbing.hpp"
#include "collectives/two_levels.hpp"
#include "comm/comm_impl.hpp"

namespace pickle {
namespace coll {
namespace {

// From this size on, the own block's copy runs beside the call's sends (Call::copy_beside) instead of on the
// caller's stream before them. Below it the call is bound by the host's enqueue, which the side stream's fork and
// join would lengthen (about 3.5 us per call on an H100, tools/probes/copy_batch_probe: two copies on two streams
// against one). Above it the copies set the pace. On 2 x H200 (docs/results/2026-11-29h-h200x2.md), a 2-rank
// out-of-place allgather of 16 MiB (own block 8 MiB) took 48.6-48.9 us with the copy on the caller's stream and
// 37.2-37.3 beside it (in place: 35.5-35.8); one of 8 MiB (own block 4 MiB) took 33.7-35.5 on the stream and
// 35.9-37.6 beside it.
constexpr std::size_t kOwnCopyBesideBytes = 8u << 20;

/// The own block's copy into its slot (`own_source` nullptr: in place, nothing to copy). It goes while the peers'
/// ready counts are on their way, ahead of the peers' copies on the caller's stream: the copy engine would otherwise
/// idle through that wait and copy the block after the peers' data. A large block goes beside them instead, on a
/// stream of its own.
void copy_own_block(Call& call, const std::vector<Region>& own, const char* own_source, char* recv) {
  if (own_source == nullptr) return;  // then `own` may be several regions, or none
  if (own[0].bytes >= kOwnCopyBesideBytes) {
    call.copy_beside(recv + own[0].offset, own_source, own[0].bytes);
  } else {
    call.copy_local(recv + own[0].offset, own_source, own[0].bytes);
  }
}

/// This rank's regions to `peer`, from `lane`'s stream, once the peer's ready count (awaited there) shows the call.
template <typename Source>
void send_own(Call& call, int peer, const std::vector<Region>& own, Source source, Call::Lane lane) {
  call.await_ready(peer, lane);  // a side lane's stream forks from the caller's at its first send
  for (std::size_t i = 0; i < own.size(); ++i) call.send(peer, kTagAllgather, source(i), own[i].bytes, lane);
}

/// PICKLE_ALLGATHER_SCHEDULE=staggered (the default): the peers' copies one after another on the caller's stream,
/// rank + 1 first, then rank + 2, ...: at step s every rank writes to rank + s and is written by rank - s only, so
/// that each copy has the sender's and the receiver's links to itself. Through an NVSwitch one copy takes a GPU's
/// whole NVLink bandwidth, so the call takes world - 1 copy times of a block at full speed, where the parallel
/// schedule's copies share the links and went slower in sum (4 x H200: 0.63-0.73x NCCL parallel, 1.13-1.15x NCCL
/// staggered from 512 MiB; docs/results/2026-11-28b-h200x4.md). With two ranks both schedules are one copy on the
/// caller's stream.
template <typename Source>
void staggered_sends(Call& call, const std::vector<Region>& own, Source source, const char* own_source, char* recv) {
  const int rank = call.rank(), world = call.world();
  copy_own_block(call, own, own_source, recv);
  for (int step = 1; step < world; ++step) send_own(call, (rank + step) % world, own, source, Call::kCaller);
}

/// PICKLE_ALLGATHER_SCHEDULE=parallel: every peer's copy at once. The next rank's copy runs on the caller's stream
/// itself, the others' on side streams (one copy queue per peer), for GPUs whose links to different peers are
/// different links (a direct NVLink mesh), where copies to several peers add up.
template <typename Source>
void parallel_sends(Call& call, const std::vector<Region>& own, Source source, const char* own_source, char* recv) {
  const int rank = call.rank(), world = call.world();
  const int next = (rank + 1) % world;
  for (int peer = 0; peer < world; ++peer) {
    if (peer != rank && peer != next) send_own(call, peer, own, source, Call::kInput);
  }
  copy_own_block(call, own, own_source, recv);
  if (next != rank) send_own(call, next, own, source, Call::kCaller);
}

/// PICKLE_ALLGATHER_OWN_COPY=relay: rank - 1's block, landed in this rank's recv, goes back into rank - 1's own slot
/// from the caller's stream, after this rank's sends: one more step of the schedule, in which every rank writes to
/// rank - 1 and is written by rank + 1, so each copy still has both links to itself. The stream first waits for the
/// block's arrival. Rank - 1's stream had reached this call before it sent the block (its sends start from there),
/// so its slot is free to write: no ready wait.
void relay_back(Call& call, int previous, Request& from_previous, const Region& previous_block, char* recv) {
  call.stream_wait(from_previous);
  call.send(previous, kTagAllgatherRelay, recv + previous_block.offset, previous_block.bytes, Call::kCaller);
}

}  // namespace

void append_region(std::vector<Region>& regions, std::size_t offset, std::size_t bytes) {
  if (!regions.empty() && regions.back().offset + regions.back().bytes == offset) {
    regions.back().bytes += bytes;
  } else {
    regions.push_back({offset, bytes});
  }
}

std::vector<std::vector<Region>> one_block_each(int world, std::size_t bytes) {
  std::vector<std::vector<Region>> parts(static_cast<std::size_t>(world));
  for (std::size_t r = 0; r < parts.size(); ++r) parts[r].push_back({r * bytes, bytes});
  return parts;
}

void allgather_regions(Communicator::Impl& comm, Stream& stream, const OpContext& ctx, const char* send, char* recv,
                       const std::vector<std::vector<Region>>& parts, OwnCopy own_copy) {
  const int rank = comm.info.rank, world = comm.info.world_size;
  const int previous = (rank + world - 1) % world, next = (rank + 1) % world;
  const std::vector<Region>& own = parts[static_cast<std::size_t>(rank)];
  const bool copy_own = send != nullptr && own.size() == 1 && send != recv + own[0].offset;
  // Where this rank's region i comes from: `send` for its one region, else its place in recv.
  auto source = [&](std::size_t i) -> const char* { return copy_own ? send : recv + own[i].offset; };
  run_collective(comm, stream, ctx, [&](Call& call) {
    // Per pair, the same on both of its ranks (the setting must agree, OwnCopy::AsSet comes with one region per rank,
    // and a pair agrees on its transport), whether or not a rank is in place: a rank's relay is owed by rank + 1,
    // which cannot tell. Only over ipc (the copy engine, peers of one host); over shm or net a local copy is cheaper
    // than a block through host memory or the network.
    const bool relay_mode = own_copy == OwnCopy::AsSet && call.state().allgather_relay_own && world > 1;
    const bool relay_in = relay_mode && comm.uses_ipc(next);       // this rank's block comes back from rank + 1
    const bool relay_out = relay_mode && comm.uses_ipc(previous);  // rank - 1's block goes back to it
    // Peers write straight into recv: not before this rank's stream reached the call, nor this rank into theirs.
    // Every receive is posted before any ready signal or send (each waits for the peer's post). A peer's regions
    // arrive in the order it sends them (per-(peer, tag) FIFO matching).
    Request from_previous;
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      for (const Region& region : parts[static_cast<std::size_t>(peer)]) {
        Request received = call.recv(peer, kTagAllgather, recv + region.offset, region.bytes);
        if (peer == previous) from_previous = received;
        call.stream_wait_later(std::move(received));
      }
    }
    if (relay_in) call.stream_wait_later(call.recv(next, kTagAllgatherRelay, recv + own[0].offset, own[0].bytes));
    // Every ready count leaves from the caller's stream; the copies follow the schedule. With two ranks either is
    // the whole call on one stream (but for a large own block's copy): per call no fork event, no cross-stream wait
    // and no wait for the send's completion, on the host and on the GPU's path from one call to the next
    // (docs/collectives.md, "Allgather").
    for (int peer = 0; peer < world; ++peer) {
      if (peer != rank) call.send_ready(peer, kTagAllgather, Call::kCaller);
    }
    const char* own_source = copy_own && !relay_in ? send : nullptr;
    if (call.state().allgather_staggered) {
      staggered_sends(call, own, source, own_source, recv);
    } else {
      parallel_sends(call, own, source, own_source, recv);
    }
    if (relay_out) relay_back(call, previous, from_previous, parts[static_cast<std::size_t>(previous)][0], recv);
    call.finish();
  });
}

}  // namespace coll

namespace {

/// Two levels, for ranks on several hosts (G ranks on each, H hosts; docs/collectives.md "Across hosts: two levels"):
///   1. allgather with the ranks of this rank's local index on the other hosts: their parts land at their places in
///      recv (the network carries each part once per remote host, where the direct algorithm sends it to every
///      remote rank);
///   2. allgather among the host's ranks of what step 1 gathered: each rank passes on the H parts of its index,
///      which land at their places in the peers' recv (copy engines).
/// Neither step needs scratch: every part goes straight to its final place.
void allgather_in_two_levels(Communicator::Impl::HostGroups& groups, Stream& stream, const OpContext& ctx,
                             const char* send, char* recv, std::size_t bytes) {
  std::vector<std::vector<coll::Region>> across_parts(groups.across_ranks.size());
  for (std::size_t j = 0; j < across_parts.size(); ++j) {
    across_parts[j].push_back({static_cast<std::size_t>(groups.across_ranks[j]) * bytes, bytes});
  }
  // Host rank i passes on the parts of every rank of index i, in rank order (adjacent ones merged).
  std::vector<std::vector<coll::Region>> host_parts(groups.host_ranks.size());
  for (std::size_t r = 0; r < groups.index_of.size(); ++r) {
    coll::append_region(host_parts[static_cast<std::size_t>(groups.index_of[r])], r * bytes, bytes);
  }
  Communicator::Impl& across = Communicator::Impl::of(groups.across);
  Communicator::Impl& host = Communicator::Impl::of(groups.host);
  coll::across_hosts(groups, ctx, [&] {
    coll::allgather_regions(across, stream, coll::group_context(across, ctx), send, recv, across_parts,
                            coll::OwnCopy::Local);
  });
  coll::on_host(groups, ctx, [&] {
    coll::allgather_regions(host, stream, coll::group_context(host, ctx), nullptr, recv, host_parts,
                            coll::OwnCopy::Local);
  });
}

}  // namespace

void Communicator::allgather(Stream& stream, const void* send, void* recv, std::size_t count, DataType type) {
  Impl& c = *impl_;
  coll::NumberedCall numbered(c);  // first: every rank numbers every call, whatever it then runs
  const int rank = c.info.rank, world = c.info.world_size;
  OpContext ctx{.rank = rank, .op = "allgather"};
  ctx.bytes = coll::checked_bytes(ctx, count, type, 1);
  const std::size_t bytes = ctx.bytes;
  const std::size_t total = coll::checked_bytes(ctx, count, type, static_cast<std::size_t>(world));
  coll::check_stream(c, ctx, stream);
  if (bytes == 0) return;
  char* out = static_cast<char*>(recv);
  const bool in_place = send == out + static_cast<std::size_t>(rank) * bytes;
  coll::check_buffer(c, ctx, recv, total, "recv");
  if (!in_place) {
    coll::check_buffer(c, ctx, send, bytes, "send");
    if (coll::overlaps(send, bytes, recv, total)) {
      throw InvalidArgument(cat(describe(ctx), ": send overlaps recv without being in place (send == recv + rank "
                                               "* count elements)"));
    }
  }
  Impl::HostGroups* groups = coll::two_level_groups(c, ctx);
  if (groups != nullptr) {
    return allgather_in_two_levels(*groups, stream, ctx, static_cast<const char*>(send), out, bytes);
  }
  coll::allgather_regions(c, stream, ctx, static_cast<const char*>(send), out, coll::one_block_each(world, bytes),
                          coll::OwnCopy::AsSet);
}

}  // namespace pickle
