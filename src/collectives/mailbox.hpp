#pragma once
// Allreduce through mailboxes: the one-shot allreduce (every rank copies its whole input to every peer and reduces
// all of them, in rank order) without any message or host wait per call. Every rank keeps, for each peer, a mailbox
// of kMailboxDepth cells in memory that the peers mapped once (a window); call n uses cell n % kMailboxDepth. A call
// is stream operations on the caller's stream, each covering every peer at once (batched):
//
//   [wait until the peers emptied cell n % depth, for those the host cannot see did already]
//   copy the input into this rank's cell n % depth of every peer's mailbox (rank + 1 first)
//   raise every peer's "filled" count (n + 1)
//   wait until every peer's "filled" count reaches n + 1
//   reduce this rank's input and the cells, in rank order, into recv
//   raise every peer's "emptied" count (n + 1): the peers may fill the cell again
//   record the call's end (a call on another stream waits for it)
//
// The LL form (gated mailboxes, calls of up to PICKLE_ALLREDUCE_LL_MAX bytes, by default 128 KiB, at most 256 KiB) is
// one kernel too (a CTA per 16 KiB, up to PICKLE_REDUCE_CTAS): it waits (on GPU words) until the peers have emptied
// this rank's LL cell n % depth of theirs, writes its input there as flagged lines, polls the peers' lines in its own
// memory, reduces, and raises the emptied counts (ll_allreduce.hpp).
//
// The loads form (gated mailboxes, calls of up to PICKLE_ALLREDUCE_LOADS_MAX bytes, by default a whole cell) moves no
// byte by copy engine and enqueues nothing but one kernel and the call's end: the kernel waits (on GPU words) until
// the peers have read this rank's own cell n % depth of kMailboxDepth calls ago, copies the input into it, raises
// every peer's filled count, waits for theirs, reduces its input and the peers' own cells read where they lie (over
// NVLink), and raises the emptied counts. On two H200s a small call went from about 21 us to 12-14 (NCCL 11-13;
// docs/collectives.md, "Mailboxes"). From PICKLE_ALLREDUCE_PUSH_MIN bytes on (pushed) it stores the input into each
// peer's cell for this rank instead, and reduces from its own cells in local memory.
//
// On CUDA memory the wait for the filled counts and the emptied raise are the reduction kernel's own (gated, up to
// kMaxGatePeers peers, where no two ranks share a GPU): it polls the filled counts in GPU memory (words at the start
// of each rank's mailboxes, which the peers' streams write beside the host words) and writes the emptied host words
// from its last CTA, so that the stream goes from the filled raise straight to the kernel and from the kernel to
// whatever comes next. The host words are written all the same: the host reads them (the watch, send_labels), and a
// failed pair releases the kernel's wait through them as it releases stream waits (ReduceGate, reduce.hpp).
//
// What the two-sided path (pipeline.cpp) gives per call and this does not, and what stands in for it:
// - Matching by size: each call's label (bytes, type, operator, and the call's number among the communicator's
//   collectives) goes, written by the host, to every peer before the call's copies; then the rank compares the labels
//   its peers have written up to this call with its own (comm::kMailboxLabelBase). A mismatch fails the call before
//   its copies, breaks the communicator and tells the peers (comm::kOutOfStepWord). Of two ranks that differ in a
//   call, at least one sees the other's label (a full fence between writing and reading); a host that runs 64 calls
//   ahead of a peer's stream waits before it overwrites a label nobody may have compared yet (send_labels).
// - Timeouts of host waits: a peer that never raises a count (it skipped the call, or took another form of it) is
//   found by the progress thread, which watches these waits and fails the pair after PICKLE_TIMEOUT without
//   progress (Communicator::Impl::watch_stalled_waits); the released waits make the call's end check report it.
// - Landing in any buffer: results are reduced out of the cells, as the two-sided one-shot reduces out of scratch.
//
// Only where every rank reaches every peer over ipc (copy engines into mapped memory, or host memory): decided once,
// collectively, by the first call that would use it; otherwise the communicator takes the two-sided one-shot.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include <pickle/collectives.hpp>

#include "collectives/ll_allreduce.hpp"
#include "collectives/plumbing.hpp"
#include "comm/signal_area.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle {
struct WindowState;
}

namespace pickle::coll {

/// Cells per mailbox (comm::kMailboxDepth: the progress thread's watch needs it too).
inline constexpr int kMailboxDepth = comm::kMailboxDepth;

/// What a rank keeps for its mailboxes (CollectiveState::mailbox).
struct Mailbox {
  bool decided = false;  ///< the first call that would use them has decided whether they can be used
  bool usable = false;   ///< every rank reaches every peer over ipc (the same answer on every rank)
  std::size_t cell_bytes = 0;
  /// CUDA memory, at most kMaxGatePeers peers, no two ranks on one GPU (the same on every rank): the reduction waits
  /// for the filled counts and raises the emptied counts itself (ReduceGate); the peers' streams write the filled
  /// counts into words at the start of the mailboxes' memory too (then the cells), where the kernel polls them.
  bool gated = false;
  std::size_t cells_offset = 0;  ///< where the cells begin in `memory`
  /// The loads form (gated only; PICKLE_ALLREDUCE_LOADS_MAX): calls of up to loads_max_bytes copy their
  /// input into this rank's own cell n % kMailboxDepth, at outbox_offset in `memory`, and the peers' kernels read it
  /// there over NVLink: the reduction's CTAs move the data instead of copy engines (enqueue_loads_call).
  /// Calls of at least push_min_bytes (PICKLE_ALLREDUCE_PUSH_MIN) store their input into each peer's cell for this
  /// rank instead (the copy form's cells), and the kernel reads its own cells in local memory.
  std::size_t outbox_offset = 0;
  std::size_t loads_max_bytes = 0;  ///< the largest call in the loads form (0: none)
  std::size_t push_min_bytes = 0;   ///< the smallest call in the loads form that is pushed
  /// The largest call in the loads form that is pulled (through this rank's own cell; 0: none).
  std::size_t pull_max_bytes() const { return push_min_bytes == 0 ? 0 : std::min(loads_max_bytes, push_min_bytes - 1); }
  /// The bytes of one of this rank's own cells: pull_max_bytes in whole 256s, so that the cells stay aligned.
  std::size_t outbox_cell_bytes() const { return (pull_max_bytes() + 255) / 256 * 256; }
  /// The LL form (gated only; PICKLE_ALLREDUCE_LL_MAX): calls of up to ll_max_bytes go as flagged lines into the
  /// peers' LL cells (per peer kMailboxDepth of them, at ll_offset; enqueue_ll_call, ll_allreduce.hpp). Cells of
  /// their own: a flag compared with what another form left in a cell could match its data.
  std::size_t ll_offset = 0;
  std::size_t ll_max_bytes = 0;  ///< the largest call in the LL form (0: none)
  /// Per LL cell (of every peer alike): the mailbox call that last wrote it in full (take_ll_refresh).
  std::uint64_t ll_refreshed[kMailboxDepth] = {kLlNeverRefreshed, kLlNeverRefreshed, kLlNeverRefreshed,
                                               kLlNeverRefreshed};
  std::size_t ll_cell_bytes() const { return (ll_cell_bytes_for(ll_max_bytes) + 255) / 256 * 256; }
  /// This rank's mailboxes: [device words when gated] per peer (in slot order, this rank left out) kMailboxDepth
  /// cells of cell_bytes, then its own kMailboxDepth cells of outbox_cell_bytes, then per peer kMailboxDepth LL cells
  /// of ll_cell_bytes.
  std::shared_ptr<device::Allocation> memory;
  std::shared_ptr<const WindowState> window;  ///< where the peers' mailboxes are
  std::uint64_t calls = 0;                    ///< calls made through them (the same number on every rank)

  struct Label {
    std::uint32_t bytes = 0;
    std::uint32_t kind = 0;      ///< type | operator << 8
    std::uint32_t sequence = 0;  ///< the call's number among the communicator's collectives (Call::sequence)
  };
  /// This rank's labels from call own_first on, kept until every peer's label of that call has been compared.
  std::deque<Label> own;
  std::uint64_t own_first = 0;
  std::vector<std::uint64_t> checked;  ///< per peer: how many of its labels this rank has compared

  /// The end of the latest call and its stream: a call on another stream first waits for it (the counts must rise in
  /// call order). The end is the call's error check (Call::finish), whose event marks that point already: a second
  /// record per call cost about 0.5 us of host time. Held here, the check outlives a stream destroyed after the call
  /// (its event still orders the next call), and the communicator's teardown settles it with the others
  /// (settle_stream_checks).
  std::shared_ptr<device::PassedCheck> last_end;
  std::uint64_t last_stream_serial = 0;
};

/// Collective (every rank, at the same call): at the first call that would use the mailboxes, decides whether they
/// can be used and makes them; true when they can. Later calls return the decision.
bool mailbox_ready(Call& call);

/// Collective, at an allreduce that might use the mailboxes (one host; schedule auto or mailbox): makes the decision
/// of mailbox_ready at the communicator's first such allreduce, whatever its size, so that ranks whose counts differ
/// (a caller's bug: one through the mailboxes, the other two-sided) both get there and find each other out of step,
/// rather than one waiting for the other's decision.
void decide_mailboxes(Communicator::Impl& comm, Stream& stream, const OpContext& ctx);

/// True when `peer` is in an allreduce through the mailboxes at the place of `call` in the communicator's sequence of
/// collectives (its label of the mailbox call this rank would make next carries `call`'s sequence number): where
/// `call` is another collective, the ranks are out of step. A peer that has moved on past `call` labels a later one.
bool peer_in_mailbox_call_here(const Call& call, int peer);
/// Tells every peer that this rank found the collectives out of step (why = comm::kOutOfStep), or gave up a mailbox
/// call after its labels went out (comm::kGaveUp), in comm::kOutOfStepWord: their progress threads fail the pair,
/// which releases any stream of theirs that waits on this rank.
void announce_out_of_step(Call& call, std::uint32_t why) noexcept;

/// The allreduce of `count` elements (at most a cell) through the mailboxes, as part of `call`, which it finishes
/// (Call::finish). mailbox_ready must have returned true.
void allreduce_through_mailbox(Call& call, const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);

}  // namespace pickle::coll
