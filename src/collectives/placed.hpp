#pragma once
// allgather and reduce_scatter with their blocks where the caller says: what the public calls (block r at r * count)
// and the two-level algorithms (a group's blocks at their ranks' places in the whole communicator's buffers, see
// docs/collectives.md "Across hosts: two levels") share. Arguments are not checked here: the public calls check
// them once, for the whole call.

#include <cstddef>
#include <vector>

#include <pickle/communicator.hpp>

#include "collectives/plumbing.hpp"
#include "comm/comm_impl.hpp"

namespace pickle::coll {

/// A byte range of a buffer, from its start.
struct Region {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

/// Appends [offset, offset + bytes) to `regions`, merged with the last one where it starts where that one ends (one
/// message instead of two).
void append_region(std::vector<Region>& regions, std::size_t offset, std::size_t bytes);

/// One region of `bytes` per rank of `world`, rank r's at r * bytes: the regions of an allgather of equal blocks.
std::vector<std::vector<Region>> one_block_each(int world, std::size_t bytes);

/// How allgather_regions fills this rank's own region when `send` is elsewhere: Local, a copy on this GPU; AsSet, as
/// PICKLE_ALLGATHER_OWN_COPY says (local, or relay: rank + 1 copies it back by copy engine). AsSet only where every
/// rank has one region and passes AsSet (the public allgather).
enum class OwnCopy { Local, AsSet };

/// allgather among the ranks of `comm`: `parts[p]` (the same on every rank) lists the regions of `recv` that rank p
/// contributes; each lands at the same offsets of every peer's `recv` (copy engines, no scratch). This rank's
/// regions are in its `recv` already when `send` is null or is its one region's place; otherwise `send` holds its one
/// region, which is also put into place (see OwnCopy).
void allgather_regions(Communicator::Impl& comm, Stream& stream, const OpContext& ctx, const char* send, char* recv,
                       const std::vector<std::vector<Region>>& parts, OwnCopy own_copy);

/// One reduce_scatter of a reduce_scatter_blocks call: block p of `send` (offsets and lengths in elements, the same
/// on every rank) is reduced across the ranks into `recv` of rank p.
struct ScatterStep {
  Blocks blocks;
  char* recv = nullptr;
};

/// reduce_scatter among the ranks of `comm`, once per step, in one call (the steps' pipelines follow one another
/// without a call boundary between them). Every rank passes the same steps (their `recv` aside).
void reduce_scatter_blocks(Communicator::Impl& comm, Stream& stream, const OpContext& ctx, const char* send,
                           const std::vector<ScatterStep>& steps, DataType type, ReduceOp op);

}  // namespace pickle::coll
