#pragma once
// What every collective shares: the per-communicator state (side streams, scratch, the reduction budget), one call's
// messages and stream waits, argument checks, and how data is cut into blocks and chunks.
//
// Data moves through the communicator's two-sided path (Communicator::Impl::send/recv): the receiver announces its
// buffer, the sender's copy engine writes straight into it and a stream write-value marks completion. Collective
// messages use negative tags, one per kind of message; since every rank issues collectives in the same order with
// the same counts, the per-(peer, tag) FIFO matching pairs the i-th send with the i-th receive across calls.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <pickle/collectives.hpp>
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "comm/signal_area.hpp"
#include "core/error_text.hpp"
#include "core/format.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle {
struct CollectiveFamily;  // comm/comm_impl.hpp
}  // namespace pickle

namespace pickle::coll {

/// Tags of the collectives' messages. Below 0: the public send/recv reject them, so user traffic never mixes in.
enum Tag : int {
  kTagAllgather = -1,
  kTagBroadcast = -2,
  kTagAlltoall = -3,
  kTagReduceScatter = -4,
  kTagAllreduceReduce = -5,  ///< allreduce, first half: every rank's block to its owner
  kTagAllreduceGather = -6,  ///< allreduce, second half: each owner's reduced block to everyone
  kTagBroadcastReady = -7,   ///< broadcast: "my stream reached this call" from a non-root rank to the root (0 bytes)
  kTagAllgatherRelay = -8,   ///< allgather, PICKLE_ALLGATHER_OWN_COPY=relay: a rank's own block back from rank + 1
};

/// Scratch stages of the pipelined collectives: consecutive chunks land in consecutive stages (round robin, across
/// calls too: Scratch::stage_of), so that up to kStages chunks are in flight while earlier ones are reduced.
inline constexpr int kStages = 4;

/// Receive space for the pipelined collectives: kStages stages of `slots` slots of `slot_bytes`, in one allocation of
/// the communicator's kind (peers map it once and keep the mapping). A stage is reused only after the last reader of
/// its previous contents (a reduction, queued on some stream) has finished: re-posting it as a receive earlier
/// would let a peer's copy overwrite data that a queued reduction has not read yet. Every stage has an event that
/// its readers' stream records; acquire() waits for it on the host, bounded by PICKLE_TIMEOUT.
class Scratch {
 public:
  /// Lays out the stages for this call: kept while its slots are at least `slot_bytes` (a smaller chunk uses the start
  /// of each slot); otherwise (the regions move) first waits until every earlier reader is done, and grows the
  /// allocation (a new one) when it is too small.
  void prepare(MemoryKind kind, int device, std::size_t slot_bytes, int slots, const OpContext& ctx, double timeout);
  /// Waits (host, bounded) until the readers of `stage`'s previous contents have finished.
  void acquire(int stage, const OpContext& ctx, double timeout);
  char* slot(int stage, int index) const;
  /// Marks the end of `stage`'s readers on `stream`; returns the event, which later work may wait for too.
  device::Event& release(int stage, device::Stream& stream);
  /// The stage of chunk `chunk` of the current exchange. The stages go round across exchanges: the next one's chunk 0
  /// takes the stage after this one's last (advance). Starting every exchange at stage 0 made a call of one chunk
  /// acquire the stage its predecessor had just released, so the host waited for the previous call's reduction
  /// before it enqueued anything of the next, and small calls ran host time plus GPU time back to back. Only the
  /// receiver picks its stages (its receives name the slots), so the ranks need not agree on them.
  int stage_of(std::size_t chunk) const;
  /// Moves the round robin past an exchange of `chunks` chunks.
  void advance(std::size_t chunks);

 private:
  void drain(const OpContext& ctx, double timeout);

  std::shared_ptr<device::Allocation> memory_;
  /// Allocations that memory_ outgrew, kept until the communicator goes (see CollectiveState::retired).
  std::vector<std::shared_ptr<device::Allocation>> retired_;
  std::size_t slot_bytes_ = 0;
  int slots_ = 0;
  std::vector<std::unique_ptr<device::Event>> events_;
  int first_stage_ = 0;  ///< the stage of the current exchange's chunk 0
};

/// PICKLE_ALLREDUCE_SCHEDULE: how allreduce goes (allreduce.cpp).
enum class AllreduceSchedule {
  Auto,     ///< allreduce_algorithm's rule: one-shot for small messages, phased or fused for the rest
  Fused,    ///< one pipeline: each reduced chunk goes on to the peers while later chunks still arrive
  Phased,   ///< a whole reduce_scatter, then a whole allgather in place
  OneShot,  ///< every rank sends its whole input to every peer and reduces all of them itself
  Mailbox,  ///< one-shot through cells that every rank keeps for each peer, with no message per call (mailbox.cpp)
};
/// What one allreduce call runs: the forms above.
enum class AllreduceAlgorithm { Fused, Phased, OneShot, Mailbox };
/// The smallest block (bytes per rank) that Auto sends in two phases. On four H200s (docs/collectives.md, "Allreduce")
/// phased was 1.07-1.17x fused with 128-512 MiB blocks in every run, fused 1.07x phased with 8 MiB blocks; with 32
/// MiB blocks one run gave phased 1.21x and a noisier one less than fused: not settled.
inline constexpr std::size_t kPhasedAllreduceMinBlock = std::size_t{32} << 20;
/// The most a rank sends in an allreduce that Auto runs one-shot: (ranks - 1) x the message. On H200s
/// (docs/results/2026-11-28h-h200x4.md) one-shot took 28-30 us against fused's 38-47 up to 1 MiB and 42 against 52 at
/// 4 MiB on two ranks, and was behind from 16 MiB; on four ranks 56-64 us (57-64 without tokens, the default since)
/// against 99-110 up to 1 MiB, level at 4 MiB.
inline constexpr std::size_t kOneShotAllreduceMaxSent = std::size_t{4} << 20;

struct Mailbox;  // mailbox.hpp

/// Everything the collectives keep per communicator. Destroyed with the communicator (see state_of).
struct CollectiveState {
  std::mutex call_mutex;  ///< one collective at a time: they must be issued in the same order on every rank

  /// Per lane and peer: the streams that sends to the peer start from, so that sends to different peers run on
  /// different copy queues and never wait behind the reductions queued on the caller's stream. Lane kInput sends
  /// the caller's data: it waits for the caller's stream at the start of each call. Lane kResult sends what this
  /// call computed (allreduce's reduced chunks): it waits for each reduction, on a queue of its own so that the
  /// input sends of later chunks do not queue behind those waits.
  std::vector<std::optional<Stream>> side[2];
  /// Per lane: the one side stream of every peer's sends, for calls that share them (Call::share_side_streams).
  std::optional<Stream> shared_side[2];
  std::unique_ptr<device::Event> fork_event;
  /// The end of a call's copy_beside: the caller's stream waits for it at finish.
  std::unique_ptr<device::Event> beside_done;
  /// Per peer: the ready signals awaited so far (await_ready), so the count the next one expects. Every rank issues
  /// the same collectives in the same order, so the i-th wait meets the peer's i-th signal.
  std::vector<std::uint32_t> ready_awaited;
  /// Per peer: the pipeline tokens awaited so far (Call::await_token), as ready_awaited.
  std::vector<std::uint32_t> tokens_awaited;
  Scratch scratch;
  /// The two-level reduce_scatter's partial results between its steps (reduce_scatter.cpp), made on first use and
  /// grown when too small, and the event its last call's readers recorded.
  std::shared_ptr<device::Allocation> partials;
  std::unique_ptr<device::Event> partials_read;
  /// Buffers that a larger one replaced, kept until the communicator goes: freeing GPU or pinned memory (cudaFree,
  /// cudaFreeHost, cudaHostUnregister) waits until every stream of the device is idle (tools/probes/
  /// host_unregister_probe), so a call that freed one would wait for a stream held on a peer's signal, and the peer
  /// may be waiting for this very call. Peers keep their mappings of them until then anyway. Scratch grows twofold up
  /// to its ceiling and the partials twofold where that fits, so these hold about as much as the buffers in use.
  std::vector<std::shared_ptr<device::Allocation>> retired;
  int reduce_ctas = 8;  ///< PICKLE_REDUCE_CTAS
  /// PICKLE_ALLGATHER_SCHEDULE: true (staggered, the default): one peer at a time on the caller's stream, rank + 1
  /// first, so that at each step every rank receives from one peer only; false (parallel): each peer's copy on its
  /// own copy queue, all at once (allgather.cpp).
  bool allgather_staggered = true;
  /// PICKLE_ALLGATHER_OWN_COPY: false (local, the default): an out-of-place allgather copies the rank's own block
  /// into its slot itself, which CUDA runs as SM work; true (relay): rank + 1 copies it back from its recv buffer
  /// with its copy engine, 0 SMs for one more block over the links (allgather.cpp).
  bool allgather_relay_own = false;
  /// PICKLE_PIPELINE_SCHEDULE: true (ordered, the default, or staggered): one side stream per lane for all peers
  /// (Call::share_side_streams), taken rank + 1 first, so that each lane copies to one peer at a time; false
  /// (parallel): the pipeline's sends to each peer on a side stream of that peer's own, all peers at once
  /// (pipeline.cpp).
  bool pipeline_staggered = true;
  /// PICKLE_PIPELINE_SCHEDULE=ordered and three ranks or more: staggered, and each input copy into a peer waits for
  /// the token of the rank that copies into that peer just before it in the schedule (pipeline.cpp).
  bool pipeline_ordered = false;
  AllreduceSchedule allreduce_schedule = AllreduceSchedule::Auto;  ///< PICKLE_ALLREDUCE_SCHEDULE
  std::size_t allreduce_loads_max = 0;                             ///< PICKLE_ALLREDUCE_LOADS_MAX (mailbox.hpp)
  std::size_t allreduce_ll_max = 0;                                ///< PICKLE_ALLREDUCE_LL_MAX (mailbox.hpp)
  std::size_t allreduce_push_min = 0;                              ///< PICKLE_ALLREDUCE_PUSH_MIN (mailbox.hpp)
  std::uint64_t calls_made = 0;  ///< collective calls so far (run_collective): the next call's Call::sequence
  /// The allreduce mailboxes (mailbox.hpp), made by the first call that would use them.
  std::shared_ptr<Mailbox> mailbox;
  std::size_t chunk_bytes = 0;  ///< PICKLE_COLL_CHUNK; 0: chunk_elements chooses
};

/// The collectives' state of `comm`, created on first use. It is owned by the communicator (through an entry in its
/// window list, which lives exactly as long as the communicator), so that side streams and scratch memory go away
/// with it, before the mappings and signal words they may use.
CollectiveState& state_of(Communicator::Impl& comm);

/// One collective call: posts receives and sends, adds the stream waits, and at its end adds a check (run on the host
/// once the stream has passed the call: Stream::check_when_passed) that turns a receive or send that failed, or a
/// ready wait that a failed pair released (peer death), into an error of the stream, so that a synchronize after the
/// call reports it.
class Call {
 public:
  Call(Communicator::Impl& comm, CollectiveState& state, Stream& stream, const OpContext& ctx);

  int rank() const noexcept;
  int world() const noexcept;
  Communicator::Impl& comm() const noexcept { return comm_; }
  /// This call's number among the communicator's collective calls (the same on every rank that is in step).
  std::uint64_t sequence() const noexcept { return sequence_; }
  /// The number of the application's call it is a step of, among the calls of the communicator's CollectiveFamily
  /// (NumberedCall; the same on every rank that is in step): what its messages and its end check compare with the
  /// losses noted (Communicator::Impl::collective_loss).
  std::uint64_t number() const noexcept { return number_; }
  MemoryKind kind() const noexcept;
  int device() const noexcept;
  double timeout() const noexcept;
  const OpContext& ctx() const noexcept { return ctx_; }
  device::Stream& stream() const noexcept { return stream_.impl(); }
  CollectiveState& state() const noexcept { return state_; }
  /// True once a message was posted (a failure after that leaves the ranks out of step), or a side stream was given
  /// work (copy_beside: a failure must still join it, see abandon).
  bool started() const noexcept { return started_; }

  /// Posts a receive of `bytes` from `peer` (nothing for 0 bytes: an empty Request).
  Request recv(int peer, int tag, void* ptr, std::size_t bytes);
  /// Which stream a send starts from: a side stream (see CollectiveState::side), or kCaller, the caller's stream
  /// itself, for the one peer whose copy a call runs there (allgather's next rank): no fork event, no cross-stream
  /// wait and, where the copy joins the stream, no stream wait for its completion. Ready counts can be raised and
  /// awaited there too (send_ready, await_ready with kCaller).
  enum Lane { kInput = 0, kResult = 1, kCaller = 2 };
  /// Sends `bytes` to `peer` from its stream of `lane`: a side stream starts after the caller's stream's work as of
  /// the call's first send, and after the events given to side_wait for that lane. Nothing for 0 bytes. Waits
  /// (host, bounded) until the peer has posted the matching receive, so that the copy joins that stream (see
  /// wait_for_post). The caller's stream waits for every send by the call's end (finish): where the copies run on
  /// the stream they were given (Impl::sends_join_given_stream), for the last one on each side stream only, since
  /// they complete in order, and for none on the caller's stream.
  Request send(int peer, int tag, const void* ptr, std::size_t bytes, Lane lane = kInput);
  /// Later sends to `peer` on side lane `lane` also wait for `event` (its latest record as of now).
  void side_wait(int peer, device::Event& event, Lane lane);
  /// Handshake of the collectives whose peers write straight into this rank's recv buffer: a count per pair of calls
  /// reached, in the pair's collectives' ready signal slot (comm::kCollectiveReadySlot). No control message and no
  /// host wait: a stream write of the count, and a stream wait for the peer's.
  /// send_ready: tells `peer` that this rank's stream has reached the call: its input side stream (or, with kCaller,
  /// the caller's stream) raises the count after the caller's stream's earlier work (which may still read or write
  /// recv). Only once the host has seen `peer`'s receive for this rank's next send on `tag` (wait_for_post): a
  /// signal raised while the peer is not in the call (it failed its arguments alone, and this rank's call then times
  /// out) would be taken by the peer's next call for its own, and that call would write into this failed call's
  /// buffer (found by review). Every rank posts its receives before it gets here, so the wait is short.
  void send_ready(int peer, int tag, Lane lane = kInput);
  /// await_ready: later sends to `peer` on `lane` (kInput or kCaller) wait, on that stream, not the host, until its
  /// count shows this call. A wait that the pair's failure released is reported by the call's end check (finish).
  void await_ready(int peer, Lane lane = kInput);
  /// Broadcast's handshake, a 0-byte message rather than the count: a non-root rank receives from the root but
  /// sends it nothing, so it has no post of the root to wait for before a signal, and an unconfirmed signal could be
  /// taken by a later call of a root that failed this one alone. The root posts a 0-byte receive per non-root
  /// (post_ready_message); the non-root, once that post arrived, sends it a 0-byte message from its input side stream
  /// (send_ready_message: it leaves after the stream's earlier work); the root's side stream waits for it before the
  /// copy (await_ready_message).
  Request post_ready_message(int peer);
  void send_ready_message(int peer);
  void await_ready_message(int peer, Request& ready);
  /// The caller's stream raises every peer's signal `slot` (one of the collectives' slots; every peer over ipc) by
  /// one after its work so far, one batched stream write that also writes `also`; returns the new counts, indexed by
  /// peer.
  std::vector<std::uint32_t> raise_on_stream_for_all(int slot, std::span<const device::Stream::Flag> also = {});
  /// The counts of raise_on_stream_for_all, for a kernel on the caller's stream that writes them itself (a gated
  /// reduction): nothing is enqueued.
  std::vector<std::uint32_t> count_raised_by_kernel_for_all(int slot);
  /// The caller's stream waits until each peer's signal `slot` reaches its count, one batched stream wait; a wait that
  /// the pair's failure released is reported by the call's end check (finish), as await_ready's.
  void await_on_stream_for_all(int slot, std::span<const comm::SignalTarget> waits);
  /// await_on_stream_for_all for waits that a kernel on the caller's stream does itself (a gated reduction): noted
  /// for the watch, teardown and the end check, nothing enqueued.
  void awaited_by_kernel_for_all(int slot, std::span<const comm::SignalTarget> waits);
  /// The ranks' collective sequences are out of step (found before anything of this call was enqueued): a failure of
  /// the call must break the communicator, as one after its first message does.
  void mark_out_of_step() noexcept { started_ = true; }
  /// The ordered pipeline's tokens (PICKLE_PIPELINE_SCHEDULE=ordered, pipeline.cpp), in the pair's token slot
  /// (comm::kCollectiveTokenSlot), on the input lane's stream: send_token raises `peer`'s count once `sent` (this
  /// rank's latest copy, to a third rank; empty: none) is done; await_token makes later sends on the lane wait until
  /// `peer`'s count reaches the next one this rank expects. Tokens only order copies, never guard data: every rank
  /// raises and awaits the same tokens in each call, whatever its blocks' lengths.
  void send_token(int peer, Request& sent);
  void await_token(int peer);
  /// The tokens this call will raise to `peer` in all (before its first send): those still owed when the call fails
  /// partway are raised by abandon, so that a peer whose copies wait for them is not held until PICKLE_TIMEOUT.
  void owe_tokens(int peer, std::uint32_t count);
  /// Copies `bytes` from `src` to `dst` inside this rank's memory on the caller's stream, counted in
  /// CommStats::local_copy_bytes (on CUDA it is SM work: the one thing that takes SMs in the copy-only collectives).
  void copy_local(void* dst, const void* src, std::size_t bytes);
  /// Copies `bytes` from `src` to `dst` (this rank's own data: an allgather's block into its own slot) on a side
  /// stream of this rank's own, which starts after the caller's stream's work so far; the caller's stream waits for
  /// the copy at finish. It then runs beside the sends queued on the caller's stream (it is SM work, they are copy
  /// engines'), instead of before or after them: worth its four extra stream operations (a fork and a join) only
  /// where the copies, not the host, set the pace of the call. Counted in CommStats::local_copy_bytes too.
  void copy_beside(void* dst, const void* src, std::size_t bytes);
  /// From here on this call's sends to every peer on a lane (kInput, kResult) go on one side stream of that lane
  /// (CollectiveState::shared_side) instead of one per peer: they copy one after another, in the order they were
  /// issued. copy_beside keeps a stream of its own.
  void share_side_streams() noexcept { shared_side_ = true; }
  /// The caller's stream waits for `request` from here on (a send: the host blocks until the peer has posted).
  void stream_wait(Request& request);
  /// The caller's stream waits for `request` (a receive) at the end of the call.
  void stream_wait_later(Request request);
  /// Adds the stream waits for the sends and the deferred ones, and the error check. The call's results are ready,
  /// and its send buffers free, when the stream gets there. Returns the error check (null when the call has nothing
  /// to check: no receive, send or signal wait), whose point is the call's end.
  std::shared_ptr<device::PassedCheck> finish();
  /// After a failure: the caller's stream waits for everything this call queued on side streams and for its sends
  /// (copies that read the caller's buffers), so that synchronizing it before freeing them is enough. Never throws.
  void abandon() noexcept;

 private:
  /// `stream` waits for `request` (Communicator::Impl::on_stream: the call checks its requests itself, in finish).
  void wait_on_stream(Request& request, Stream& stream);
  /// On host memory, behind the tokens this call raised (on the input lane's shared stream): a callback that, if
  /// that stream drops it unrun, raises the tokens from the host instead (Communicator::Impl::raise_signal_from_host).
  void hear_of_dropped_tokens();
  Stream& side_stream(int peer, Lane lane);
  /// The stream of `lane` for `peer`: the caller's for kCaller, else the side stream, forked (see fork).
  Stream& lane_stream(int peer, Lane lane);
  /// Makes the side stream wait for the caller's stream as of this call's first send (once per call and stream).
  void fork(int peer, Lane lane);
  /// Waits until `peer`'s receive for this rank's next send on `tag` has arrived. A send issued before that is queued
  /// by the communicator on its one copy stream per peer, behind every other early send to that peer: a send that
  /// waits for a reduction (allreduce's results) would hold back the next chunks' input copies, and a send that waits
  /// for the peer's ready signal could deadlock against a peer doing the same. Matched at once, each send stays on
  /// the side stream chosen for it. Every rank posts its receives before it waits here, so the wait is short.
  void wait_for_post(int peer, int tag);
  /// The ready handshake's first steps, for both its forms: the stream of `lane` (kInput or kCaller), once `peer`'s
  /// post on `tag` has arrived.
  Stream& ready_side(int peer, int tag, Lane lane = kInput);

  Communicator::Impl& comm_;
  CollectiveState& state_;
  Stream& stream_;
  OpContext ctx_;
  std::uint64_t sequence_;
  std::uint64_t number_;
  std::string prefix_;  // describe(ctx_), after a two-level step's prefix: the head of errors reported from the stream
  bool started_ = false;
  bool forked_ = false;
  bool beside_ = false;  // copy_beside queued a copy that finish must join
  bool shared_side_ = false;  // share_side_streams
  std::vector<bool> side_forked_[2];
  std::vector<Request> deferred_;
  std::vector<Request> recvs_;
  struct SignalWait {
    int peer;
    int slot;
    std::uint32_t expected;
  };
  std::vector<SignalWait> signal_waits_;  // for finish()'s check: ready waits, mailbox waits
  std::vector<Request> sends_;  // for finish()'s check and abandon()
  std::vector<std::uint32_t> tokens_owed_;  // per peer: owe_tokens less send_token, for abandon()
  std::vector<int> token_peers_;  // the peers owe_tokens named, for hear_of_dropped_tokens()
  // What the caller's stream waits for at the end, for the sends: per side lane and peer the latest send whose copy
  // ran on that side stream (they complete in order), and each send whose copy runs elsewhere.
  std::vector<Request> last_on_side_[2];
  std::vector<Request> end_waits_;
};

/// Numbers an application's collective call in the communicator's CollectiveFamily, for as long as it runs: made
/// at the top of each public collective, so that every rank numbers the same calls whichever steps it runs; the
/// two-level steps' calls on the host groups (the same family) take the number of the call they are part of. A call
/// that throws before any step of it started gives its number back, as run_collective gives the sequence number.
class NumberedCall {
 public:
  explicit NumberedCall(Communicator::Impl& comm);
  ~NumberedCall();
  NumberedCall(const NumberedCall&) = delete;
  NumberedCall& operator=(const NumberedCall&) = delete;

 private:
  CollectiveFamily& family_;
  int exceptions_ = 0;  // std::uncaught_exceptions() at the start
};

/// A step of the application's call under way sent or posted a message: its number is kept if the call fails.
void note_started(Communicator::Impl& comm) noexcept;
/// Before a call's Call is made: its communicator's family must be in a numbered call (NumberedCall), and not broken
/// by an earlier call that failed after it had started (the ranks' message sequences are out of step from then on,
/// in every communicator of the family: a two-level step's failure breaks its parent too); else the call fails fast
/// with the first failure's reason.
void check_not_broken(Communicator::Impl& comm, const OpContext& ctx);
/// Records that a call of `comm`'s family failed after it had started (the first such failure is kept).
void mark_broken(Communicator::Impl& comm, const std::string& why, ErrorCode code, int peer);
/// The peer a PeerError names, else -1.
int peer_of(const Error& error) noexcept;

/// Runs one collective: one call at a time per communicator, fails fast when an earlier call broke the sequence,
/// and names the collective in any error it raises.
template <class Body>
void run_collective(Communicator::Impl& comm, Stream& stream, const OpContext& ctx, Body&& body);

// --- argument checks (InvalidArgument naming rank, operation and size)

/// count * sizeof(type) * multiple, or InvalidArgument when it does not fit in size_t.
std::size_t checked_bytes(const OpContext& ctx, std::size_t count, DataType type, std::size_t multiple);
/// `stream` must be of the communicator's kind (and device, for CUDA).
void check_stream(const Communicator::Impl& comm, const OpContext& ctx, const Stream& stream);
/// [ptr, ptr + bytes) must be memory of the communicator's kind (and device) inside one allocation pickle can find.
/// Nothing to check for 0 bytes.
void check_buffer(const Communicator::Impl& comm, const OpContext& ctx, const void* ptr, std::size_t bytes,
                  const char* which);
/// True when the two byte ranges share a byte.
bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) noexcept;

// --- how data is cut

/// Per rank: where its block starts (elements) and how long it is.
struct Blocks {
  std::vector<std::size_t> offset;
  std::vector<std::size_t> length;
  std::size_t max_length() const noexcept;
};
/// `count` elements cut into `world` blocks of (nearly) equal size whose starts are 16-byte aligned relative to the
/// buffer (vector loads in the reduction); uneven counts make some blocks shorter, small counts leave some empty.
Blocks split_blocks(std::size_t count, std::size_t element_size, int world);
/// `world` blocks of exactly `count` elements each (reduce_scatter, alltoall).
Blocks equal_blocks(std::size_t count, int world);
/// The index of `peer` among `rank`'s peers (every rank but itself, in rank order): where scratch and mailboxes keep
/// what `peer` sends to `rank`.
constexpr int peer_slot(int peer, int rank) { return peer < rank ? peer : peer - 1; }
/// a / b rounded up (chunks of a block, pieces of a size).
constexpr std::size_t ceil_div(std::size_t a, std::size_t b) { return a / b + (a % b != 0 ? 1 : 0); }
/// Elements per pipeline chunk for blocks of up to `max_block` elements: `fixed_bytes` (PICKLE_COLL_CHUNK) when not 0,
/// else a quarter of the block rounded down to 16, 32 or 64 MiB, or the whole block under 16 MiB (CUDA), or about
/// an eighth of it within 64 KiB-1 MiB (host memory); then within the scratch ceiling. It depends only on arguments
/// that every rank passes alike, so that every rank cuts the same chunks (the message sequences must match).
std::size_t chunk_elements(MemoryKind kind, std::size_t max_block, std::size_t element_size, int world,
                           std::size_t fixed_bytes = 0);
/// Elements per chunk of the fused allreduce of two ranks on CUDA memory (PICKLE_COLL_CHUNK unset): its last chunk's
/// reduction and its copy back overlap nothing, so some blocks go in smaller chunks than chunk_elements cuts (whole
/// under 16 MiB, 16 MiB from there): blocks of 8-16 MiB in halves; blocks of 16-64 MiB of 2-byte types (whose
/// reduction is the slower) in 8 MiB; chunk_elements' elsewhere. Two H200s (docs/results/2026-11-30e-h200x2.md, call
/// 10, chunks forced with PICKLE_COLL_CHUNK): bf16 16 MiB messages 112 -> 98 us with 4 MiB chunks, 32 MiB 192 -> 155
/// with 8 MiB, 64 MiB 263 -> 253 with 8 MiB; f32 64 MiB 244 -> 254 with 8 MiB (so not for 4-byte types); from 128
/// MiB the default's 16 MiB and larger were faster. Three ranks or more were not measured (they keep chunk_elements).
std::size_t two_rank_allreduce_chunk_elements(std::size_t max_block, std::size_t element_size);
/// How an allreduce of `count` elements runs under `schedule` (PICKLE_ALLREDUCE_SCHEDULE); a world of one always
/// Fused (nothing to exchange). Auto: through the mailboxes where the ranks are on one host and the message fits a
/// cell (mailbox_cell_bytes; Communicator::allreduce takes the two-sided one-shot where some pair is not over ipc);
/// else one-shot where the ranks are on one host and each would send at most kOneShotAllreduceMaxSent in it; else
/// phased with three or more ranks, all on one host (the gain is the NVSwitch's: a copy to one peer at a time;
/// nothing measured it across hosts), and blocks of at least kPhasedAllreduceMinBlock; else fused. Phased (forced):
/// wherever every rank's block is non-empty (the allgather's ready signals wait for each block's receive), else
/// fused. Mailbox (forced): as auto, whose first rule it is (one host, messages up to a cell). Every rank must get the
/// same answer: it depends only on arguments that every rank passes alike.
AllreduceAlgorithm allreduce_algorithm(AllreduceSchedule schedule, std::size_t count, std::size_t element_size,
                                       int world, bool one_host);
/// The bytes of one mailbox cell (mailbox.hpp) for a world of `world` ranks: what one-shot's rule lets a rank send to
/// each peer (kOneShotAllreduceMaxSent / (world - 1)), in whole pages. Mailbox (forced) takes messages up to this.
std::size_t mailbox_cell_bytes(int world);

// --- template definition

template <class Body>
void run_collective(Communicator::Impl& comm, Stream& stream, const OpContext& ctx, Body&& body) {
  CollectiveState& state = state_of(comm);
  std::lock_guard lock(state.call_mutex);
  check_not_broken(comm, ctx);
  Call call(comm, state, stream, ctx);
  try {
    body(call);
    if (call.started()) note_started(comm);
  } catch (const Error& e) {
    // A call that failed before it started gives its sequence number back: every rank that retries it must give
    // it the same number (mailbox labels carry it). Its family number goes back with the application's call
    // (NumberedCall), unless a step of it started.
    if (!call.started()) --state.calls_made;
    if (call.started()) {
      note_started(comm);
      call.abandon();
      mark_broken(comm, e.what(), e.code(), peer_of(e));
    }
    // Argument errors already name the collective; the others come from a message of it.
    if (e.code() == ErrorCode::InvalidArgument && !call.started()) throw;
    rethrow_with_prefix(e, describe(ctx));
  } catch (...) {
    if (!call.started()) --state.calls_made;
    if (call.started()) {
      note_started(comm);
      call.abandon();
      mark_broken(comm, "an unexpected exception", ErrorCode::Internal, -1);
    }
    throw;
  }
}

}  // namespace pickle::coll
