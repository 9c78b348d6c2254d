#include "collectives/plumbing.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>

#include "collectives/mailbox.hpp"
#include "comm/comm_impl.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/log.hpp"

namespace pickle::coll {
namespace {

/// Chunk sizes and the scratch ceiling per memory kind. On CUDA a chunk costs the host a few control messages, a
/// kernel launch and stream operations (25-50 us on one H100), and an allreduce's host runs in step with its
/// reductions, so chunks must be large enough that the copy engines, not the host, set the pace (4 MiB takes ~11 us
/// at NVLink speed, 16 MiB ~45 us); a large message still cuts into enough chunks for the copies of one to overlap
/// the reduction of the previous ones. Measured: on 2 x H200 with 1 MiB chunks a 16 MiB allreduce was host-bound
/// (8 chunks); on one H100 (docs/results/2026-11-24-h100x1.md, eighth session) 16 MiB chunks beat 4 and 8 MiB ones
/// at every size from 16 MiB to 1 GiB (a 64 MiB allreduce: 265 us per call, against 423 us with the 4 MiB chunks
/// of the earlier rule). On 2 x H200 (docs/results/2026-11-28b-h200x4.md) larger blocks want larger chunks: a 2-rank
/// allreduce of 256 MiB reached 343 GB/s busbw with 32 MiB chunks, of 512 MiB 360 and of 1 GiB 351-355 with 64 MiB
/// chunks, against about 310 with 16 MiB ones; but 64 MiB chunks for blocks of 32-64 MiB (one or two chunks, no
/// pipeline) fell to 0.8x NCCL. So CUDA chunks are a quarter of the block rounded down to 16, 32 or 64 MiB, or the
/// whole block when it is under 16 MiB (so that a small reduction does not allocate 16 MiB of scratch per stage and
/// peer: found by review). PICKLE_COLL_CHUNK overrides it, to measure. On host memory the copies are memcpy on
/// stream threads: small chunks keep the CPU tests' pipelines deep.
/// The CUDA scratch ceiling, 1 GiB (all stages of all peers), lets four ranks keep 64 MiB chunks (64 MiB x 4 stages x
/// 3 peers = 768 MiB): under the 256 MiB of before, four ranks' chunks were capped at 21 MiB, and on four H200s raw
/// staggered copies of 16 MiB chunks move 285 GB/s busbw against 361 with 64 MiB ones and 390 with whole blocks
/// (tools/probes/copy_pattern_probe, docs/results/2026-11-28e-h200x2.md); with the 1 GiB ceiling a 2 GiB alltoall on
/// four ranks went from 229 to 303. Scratch is allocated only as large as a collective needs (4 stages x peers x chunk).
struct ChunkLimits {
  std::size_t chunks_per_block;  ///< a block is cut into about this many chunks, before the limits below apply
  std::size_t min_bytes;
  std::size_t max_bytes;
  std::size_t whole_block_bytes;  ///< a block up to this size is one chunk, whatever chunks_per_block says
  std::size_t scratch_bytes;      ///< most scratch one communicator may hold (all stages, all peers)
};

constexpr ChunkLimits limits_of(MemoryKind kind) {
  return kind == MemoryKind::Cuda ? ChunkLimits{4, 4u << 10, 64u << 20, 16u << 20, std::size_t{1} << 30}
                                  : ChunkLimits{8, 64u << 10, 1u << 20, 0, 32u << 20};
}

/// Chunk sizes stay multiples of this: whole elements of every type, and 16-byte aligned chunk starts.
constexpr std::size_t kChunkAlign = 4096;

std::size_t read_chunk_bytes() {
  const std::optional<std::string> text = env::get_if_set("PICKLE_COLL_CHUNK");
  if (!text) return 0;
  const long long bytes = env::get_int("PICKLE_COLL_CHUNK");
  if (bytes < static_cast<long long>(kChunkAlign) || bytes % static_cast<long long>(kChunkAlign) != 0) {
    throw InvalidArgument(cat("PICKLE_COLL_CHUNK=", *text, " must be a positive multiple of ", kChunkAlign, " bytes"));
  }
  return static_cast<std::size_t>(bytes);
}

std::size_t read_bytes_limit(const char* name) {
  const long long bytes = env::get_int(name);
  if (bytes < 0) throw InvalidArgument(cat(name, "=", bytes, " must be 0 or more bytes"));
  return static_cast<std::size_t>(bytes);
}

int read_reduce_ctas() {
  long long ctas = env::get_int("PICKLE_REDUCE_CTAS");
  if (ctas < 1 || ctas > 1024) {
    throw InvalidArgument(cat("PICKLE_REDUCE_CTAS=", ctas, " must be between 1 and 1024"));
  }
  return static_cast<int>(ctas);
}

/// A setting of two words: true for `yes`, false for `no`, anything else an error naming both.
bool read_either(const char* variable, const char* yes, const char* no) {
  const std::string value = env::get(variable);
  if (value == yes) return true;
  if (value == no) return false;
  throw InvalidArgument(cat(variable, "=", value, " must be ", no, " or ", yes));
}

/// PICKLE_PIPELINE_SCHEDULE into the state's two flags. Ordered only from three ranks: with two, each rank's one peer
/// receives from nobody else, so there is nothing to keep in step (ordered is staggered then).
void read_pipeline_schedule(CollectiveState& state, int world) {
  const std::string schedule = env::get("PICKLE_PIPELINE_SCHEDULE");
  if (schedule != "staggered" && schedule != "parallel" && schedule != "ordered") {
    throw InvalidArgument(cat("PICKLE_PIPELINE_SCHEDULE=", schedule, " must be staggered, ordered or parallel"));
  }
  state.pipeline_staggered = schedule != "parallel";
  state.pipeline_ordered = schedule == "ordered" && world > 2;
}

AllreduceSchedule read_allreduce_schedule() {
  const std::string schedule = env::get("PICKLE_ALLREDUCE_SCHEDULE");
  if (schedule == "auto") return AllreduceSchedule::Auto;
  if (schedule == "fused") return AllreduceSchedule::Fused;
  if (schedule == "phased") return AllreduceSchedule::Phased;
  if (schedule == "oneshot") return AllreduceSchedule::OneShot;
  if (schedule == "mailbox") return AllreduceSchedule::Mailbox;
  throw InvalidArgument(
      cat("PICKLE_ALLREDUCE_SCHEDULE=", schedule, " must be auto, fused, phased, oneshot or mailbox"));
}

}  // namespace

// --- state

CollectiveState& state_of(Communicator::Impl& comm) {
  std::lock_guard lock(comm.mutex);
  if (!comm.collectives) {
    auto state = std::make_shared<CollectiveState>();
    state->reduce_ctas = read_reduce_ctas();
    state->chunk_bytes = read_chunk_bytes();
    state->allgather_staggered = read_either("PICKLE_ALLGATHER_SCHEDULE", "staggered", "parallel");
    state->allgather_relay_own = read_either("PICKLE_ALLGATHER_OWN_COPY", "relay", "local");
    read_pipeline_schedule(*state, comm.info.world_size);
    state->allreduce_schedule = read_allreduce_schedule();
    state->allreduce_loads_max = read_bytes_limit("PICKLE_ALLREDUCE_LOADS_MAX");
    state->allreduce_ll_max = read_bytes_limit("PICKLE_ALLREDUCE_LL_MAX");
    state->allreduce_push_min = read_bytes_limit("PICKLE_ALLREDUCE_PUSH_MIN");
    for (auto& lane : state->side) lane.resize(static_cast<std::size_t>(comm.info.world_size));
    state->ready_awaited.assign(static_cast<std::size_t>(comm.info.world_size), 0);
    state->tokens_awaited.assign(static_cast<std::size_t>(comm.info.world_size), 0);
    comm.collectives = state;
  }
  return *static_cast<CollectiveState*>(comm.collectives.get());
}

// --- scratch

void Scratch::prepare(MemoryKind kind, int device, std::size_t slot_bytes, int slots, const OpContext& ctx,
                      double timeout) {
  if (events_.empty()) {
    for (int stage = 0; stage < kStages; ++stage) {
      events_.push_back(device::make_ordering_event(kind, std::max(0, device)));
    }
  }
  // Slots at least as large as asked for keep serving where they are: smaller chunks land at the start of each slot,
  // nothing moves, and nothing waits. Re-laid out for every change of chunk size, the stages would drain on the host
  // whenever the message size changed (alternating sizes, a one-shot allreduce between reduce_scatters), and each
  // call would again wait for its predecessor's reduction (found by review).
  if (memory_ && slots == slots_ && slot_bytes <= slot_bytes_) return;
  const std::size_t needed = static_cast<std::size_t>(kStages) * static_cast<std::size_t>(slots) * slot_bytes;
  // The regions move: every reader of the old layout must be done before anything lands in the new one.
  drain(ctx, timeout);
  slot_bytes_ = slot_bytes;
  slots_ = slots;
  if (needed == 0 || (memory_ && memory_->bytes() >= needed)) return;
  // Grow geometrically (within the ceiling) so that a sweep of growing sizes allocates a few times, not each time:
  // peers keep every allocation they mapped until the communicator goes, and so does this rank (not freed here: see
  // CollectiveState::retired).
  std::size_t bytes = needed;
  if (memory_) bytes = std::max(needed, std::min(2 * memory_->bytes(), limits_of(kind).scratch_bytes));
  if (memory_) retired_.push_back(std::move(memory_));
  memory_ = device::allocate(kind, bytes, std::max(0, device));
}

void Scratch::acquire(int stage, const OpContext& ctx, double timeout) {
  try {
    events_[static_cast<std::size_t>(stage)]->synchronize_until(Deadline::after_seconds(timeout));
  } catch (const TimeoutError& e) {
    throw TimeoutError(cat(describe(ctx), ": the reduction that reads scratch stage ", stage,
                           " did not finish within ", timeout, " s (", without_head(e.what()), ")"));
  }
}

void Scratch::drain(const OpContext& ctx, double timeout) {
  for (int stage = 0; stage < static_cast<int>(events_.size()); ++stage) acquire(stage, ctx, timeout);
}

char* Scratch::slot(int stage, int index) const {
  const std::size_t position = static_cast<std::size_t>(stage) * static_cast<std::size_t>(slots_) +
                               static_cast<std::size_t>(index);
  return static_cast<char*>(memory_->data()) + position * slot_bytes_;
}

device::Event& Scratch::release(int stage, device::Stream& stream) {
  device::Event& event = *events_[static_cast<std::size_t>(stage)];
  stream.record(event);
  return event;
}

int Scratch::stage_of(std::size_t chunk) const {
  return static_cast<int>((static_cast<std::size_t>(first_stage_) + chunk) % kStages);
}

void Scratch::advance(std::size_t chunks) { first_stage_ = stage_of(chunks); }

// --- one call

Call::Call(Communicator::Impl& comm, CollectiveState& state, Stream& stream, const OpContext& ctx)
    : comm_(comm),
      state_(state),
      stream_(stream),
      ctx_(ctx),
      sequence_(state.calls_made++),
      number_(comm.collective_family->current),
      prefix_(describe(ctx)) {
  // A step of a two-level collective: its end check's errors name the application's call and the group first.
  if (!comm.collective_family->step_prefix.empty()) prefix_ = cat(comm.collective_family->step_prefix, ": ", prefix_);
  for (auto& lane : side_forked_) lane.assign(static_cast<std::size_t>(comm.info.world_size), false);
  for (auto& lane : last_on_side_) lane.resize(static_cast<std::size_t>(comm.info.world_size));
  tokens_owed_.assign(static_cast<std::size_t>(comm.info.world_size), 0);
}

NumberedCall::NumberedCall(Communicator::Impl& comm)
    : family_(*comm.collective_family), exceptions_(std::uncaught_exceptions()) {
  if (family_.depth++ != 0) return;  // a step of a call under way: its number
  family_.current = ++family_.calls;
  family_.current_started = false;
}

void note_started(Communicator::Impl& comm) noexcept { comm.collective_family->current_started = true; }

void check_not_broken(Communicator::Impl& comm, const OpContext& ctx) {
  const CollectiveFamily& family = *comm.collective_family;
  if (family.depth == 0) {
    throw Error(ErrorCode::Internal, cat(describe(ctx), ": a collective step outside a numbered call (NumberedCall)"));
  }
  if (!family.broken) return;
  const std::string message = cat(describe(ctx), ": an earlier collective failed after it had started, so the ranks' "
                                  "collective sequences are out of step (make a new communicator); it failed with: ",
                                  *family.broken);
  if (family.broken_code == ErrorCode::Peer) throw PeerError(message, family.broken_peer);
  if (family.broken_code == ErrorCode::Timeout) throw TimeoutError(message);
  throw Error(family.broken_code, message);
}

void mark_broken(Communicator::Impl& comm, const std::string& why, ErrorCode code, int peer) {
  CollectiveFamily& family = *comm.collective_family;
  if (family.broken) return;  // the first failure is the reason
  family.broken = why;
  family.broken_code = code;
  family.broken_peer = peer;
}

int peer_of(const Error& error) noexcept {
  const auto* peer_error = dynamic_cast<const PeerError*>(&error);
  return peer_error != nullptr ? peer_error->peer() : -1;
}

NumberedCall::~NumberedCall() {
  if (--family_.depth != 0) return;
  if (std::uncaught_exceptions() > exceptions_ && !family_.current_started) --family_.calls;
}

int Call::rank() const noexcept { return comm_.info.rank; }
int Call::world() const noexcept { return comm_.info.world_size; }
MemoryKind Call::kind() const noexcept { return comm_.kind; }
int Call::device() const noexcept { return comm_.device; }
double Call::timeout() const noexcept { return comm_.timeout_seconds; }

Stream& Call::side_stream(int peer, Lane lane) {
  auto& side = shared_side_ && peer != rank() ? state_.shared_side[lane]
                                              : state_.side[lane][static_cast<std::size_t>(peer)];
  if (!side) side.emplace(std::shared_ptr<device::Stream>(device::make_stream(comm_.kind, std::max(0, comm_.device))));
  return *side;
}

Request Call::recv(int peer, int tag, void* ptr, std::size_t bytes) {
  if (bytes == 0) return Request();
  started_ = true;
  Request request = comm_.recv(peer, tag, ptr, bytes, number_);
  recvs_.push_back(request);
  return request;
}

Stream& Call::lane_stream(int peer, Lane lane) {
  if (lane == kCaller) return stream_;
  Stream& side = side_stream(peer, lane);
  fork(peer, lane);
  return side;
}

Request Call::send(int peer, int tag, const void* ptr, std::size_t bytes, Lane lane) {
  if (bytes == 0) return Request();
  Stream& from = lane_stream(peer, lane);
  started_ = true;
  // A send refused when it was matched (a size mismatch: ranks that passed different counts) has failed already: the
  // call fails now, not after PICKLE_TIMEOUT in a wait for a post that the peer, gone another way, never makes. The
  // last send is the one to look at: a mismatch shows at the first send to a peer (found by review).
  if (!sends_.empty()) sends_.back().test();
  wait_for_post(peer, tag);
  Request request = comm_.send(peer, tag, ptr, bytes, &from, number_);
  sends_.push_back(request);
  if (!comm_.sends_join_given_stream(peer)) {
    end_waits_.push_back(request);
  } else if (lane != kCaller) {  // on the caller's stream its copy is ordered already, which is what the call needs
    last_on_side_[lane][static_cast<std::size_t>(peer)] = request;
  }
  return request;
}

void Call::wait_for_post(int peer, int tag) {
  const OpContext ctx{.rank = comm_.info.rank, .peer = peer, .op = ctx_.op};
  // A peer in an allreduce through the mailboxes where this rank is in this collective posts nothing: the ranks are
  // out of step (its label carries the collective's sequence number; mailbox.hpp). So is a peer that found them so.
  const bool posted = comm_.wait_for_progress(Deadline::after_seconds(comm_.timeout_seconds), [&] {
    {
      std::lock_guard lock(comm_.mutex);
      const auto& state = comm_.peers[static_cast<std::size_t>(peer)];
      if (state.failed) throw PeerError(cat(describe(ctx), ": ", state.failure), peer);
      auto posts = state.pending_posts.find(tag);
      if (posts != state.pending_posts.end() && !posts->second.empty()) return true;
    }
    if (comm_.same_host[static_cast<std::size_t>(peer)]) {
      if (const std::uint32_t word = comm_.signals->load(peer, comm::kOutOfStepWord); word != 0) {
        throw InvalidArgument(cat(describe(ctx), ": ", comm::out_of_step_reason(peer, word)));
      }
    }
    if (peer_in_mailbox_call_here(*this, peer)) {
      announce_out_of_step(*this, comm::kOutOfStep);
      throw InvalidArgument(cat(describe(ctx), ": peer ", peer, " is in an allreduce through the mailboxes where this ",
                                "rank is in ", ctx_.op, ": the ranks' collectives are out of step"));
    }
    return false;
  });
  if (!posted) {
    throw TimeoutError(cat(describe(ctx), ": peer ", peer, " did not post its receive (tag ", tag, ") within ",
                           comm_.timeout_seconds, " s; is it in the same collective?"));
  }
}

void Call::fork(int peer, Lane lane) {
  if (side_forked_[lane][static_cast<std::size_t>(peer)]) return;
  // The send buffer's producer is the caller's stream: the side stream starts where that stream is now.
  if (!forked_) {
    if (!state_.fork_event) state_.fork_event = device::make_ordering_event(comm_.kind, std::max(0, comm_.device));
    stream().record(*state_.fork_event);
    forked_ = true;
  }
  side_stream(peer, lane).impl().wait(*state_.fork_event);
  side_forked_[lane][static_cast<std::size_t>(peer)] = true;
}

void Call::side_wait(int peer, device::Event& event, Lane lane) { side_stream(peer, lane).impl().wait(event); }

Stream& Call::ready_side(int peer, int tag, Lane lane) {
  Stream& from = lane_stream(peer, lane);
  started_ = true;
  wait_for_post(peer, tag);
  return from;
}

void Call::send_ready(int peer, int tag, Lane lane) {
  comm_.signal_peer(ready_side(peer, tag, lane).impl(), peer, comm::kCollectiveReadySlot);
}

Request Call::post_ready_message(int peer) {
  started_ = true;
  Request ready = comm_.recv(peer, kTagBroadcastReady, nullptr, 0);
  recvs_.push_back(ready);
  return ready;
}

void Call::send_ready_message(int peer) {
  // A 0-byte message still matches and still ends with the completion write, in stream order.
  Stream& side = ready_side(peer, kTagBroadcastReady);
  sends_.push_back(comm_.send(peer, kTagBroadcastReady, nullptr, 0, &side));
}

void Call::wait_on_stream(Request& request, Stream& stream) {
  // Without Request::on_stream's check of the outcome: the call checks its requests itself, once (finish).
  comm_.on_stream(*request.state(), stream.impl());
}

void Call::await_ready_message(int peer, Request& ready) { wait_on_stream(ready, side_stream(peer, kInput)); }

void Call::await_ready(int peer, Lane lane) {
  started_ = true;
  const std::uint32_t expected = ++state_.ready_awaited[static_cast<std::size_t>(peer)];
  // Not forked here: the wait may come before the lane's first send, whose fork orders the copy after the stream.
  device::Stream& on = lane == kCaller ? stream() : side_stream(peer, lane).impl();
  comm_.wait_signal_on_stream(on, peer, comm::kCollectiveReadySlot, expected);
  signal_waits_.push_back(SignalWait{peer, comm::kCollectiveReadySlot, expected});
}

namespace {

std::vector<int> all_but(int rank, int world) {
  std::vector<int> peers;
  for (int peer = 0; peer < world; ++peer) {
    if (peer != rank) peers.push_back(peer);
  }
  return peers;
}

/// Counts of `peers` (in that order) indexed by rank, 0 for the others.
std::vector<std::uint32_t> by_rank(const std::vector<int>& peers, const std::vector<std::uint32_t>& counts, int world) {
  std::vector<std::uint32_t> indexed(static_cast<std::size_t>(world), 0);
  for (std::size_t i = 0; i < peers.size(); ++i) indexed[static_cast<std::size_t>(peers[i])] = counts[i];
  return indexed;
}

}  // namespace

std::vector<std::uint32_t> Call::raise_on_stream_for_all(int slot, std::span<const device::Stream::Flag> also) {
  started_ = true;
  const std::vector<int> peers = all_but(rank(), world());
  return by_rank(peers, comm_.signal_peers(stream(), peers, slot, also), world());
}

std::vector<std::uint32_t> Call::count_raised_by_kernel_for_all(int slot) {
  started_ = true;
  const std::vector<int> peers = all_but(rank(), world());
  return by_rank(peers, comm_.count_signals_written_by_kernel(stream(), peers, slot), world());
}

void Call::await_on_stream_for_all(int slot, std::span<const comm::SignalTarget> waits) {
  if (waits.empty()) return;
  started_ = true;
  comm_.wait_signals_on_stream(stream(), slot, waits);
  for (const auto& wait : waits) signal_waits_.push_back(SignalWait{wait.peer, slot, wait.expected});
}

void Call::awaited_by_kernel_for_all(int slot, std::span<const comm::SignalTarget> waits) {
  if (waits.empty()) return;
  started_ = true;
  comm_.note_signal_waits(stream(), slot, waits);
  for (const auto& wait : waits) signal_waits_.push_back(SignalWait{wait.peer, slot, wait.expected});
}

void Call::send_token(int peer, Request& sent) {
  Stream& side = lane_stream(peer, kInput);
  started_ = true;
  // The copy ran on this stream (ipc, one copy stream per peer): ordered already (with completion lanes, the wait
  // joins the lane that wrote its word). Elsewhere (PICKLE_IPC_STREAMS above 1, shm, net) the stream first waits for
  // its completion word.
  if (sent.valid()) wait_on_stream(sent, side);
  // What abandon would raise must be what the schedule raises: every ordered call checks the count (here and at
  // finish), so a mismatch shows in any test, not only in a failure that leaves a peer waiting. Counted before
  // signal_peer, which takes the count before its stream may refuse the write: abandon then raises that count from
  // the host, not one more.
  std::uint32_t& owed = tokens_owed_[static_cast<std::size_t>(peer)];
  if (owed == 0) {
    throw Error(ErrorCode::Internal, cat(describe(ctx_), ": the ordered schedule raised more tokens to peer ", peer,
                                         " than the call planned"));
  }
  --owed;
  comm_.signal_peer(side.impl(), peer, comm::kCollectiveTokenSlot);
}

void Call::owe_tokens(int peer, std::uint32_t count) {
  if (count == 0) return;
  tokens_owed_[static_cast<std::size_t>(peer)] += count;
  if (std::find(token_peers_.begin(), token_peers_.end(), peer) == token_peers_.end()) token_peers_.push_back(peer);
}

void Call::hear_of_dropped_tokens() {
  // A host stream that gives a wait up (one for an event whose record another stream dropped) drops everything queued
  // behind it, the tokens with the sends; a peer's copy that waits for one would then hold its stream until
  // PICKLE_TIMEOUT and fail with a TimeoutError instead of with what went wrong here. Tokens order copies and guard no
  // data, so they may arrive without what they were to follow: a callback behind the last of them raises them from
  // the host when the stream drops it unrun. Only the input lane's shared stream raises tokens to a peer (ordered
  // calls share their side streams, abandon included), and a stream that gave a wait up has run nothing queued after
  // it, so no earlier count of the slot can land after this one. Host memory only: a CUDA stream runs what it
  // accepted (or fails the whole context), and a host callback there would hold the stream for a round trip through a
  // host thread in every call.
  if (kind() != MemoryKind::Host || token_peers_.empty() || !state_.shared_side[kInput]) return;
  try {
    // The hook runs on the stream's thread: the raise goes through the outbox (see raise_signals_from_outbox).
    comm_.hear_if_dropped(state_.shared_side[kInput]->impl(), [comm = &comm_, peers = token_peers_] {
      comm->raise_signals_from_outbox(peers, comm::kCollectiveTokenSlot);
    });
  } catch (const Error& refused) {
    // The stream gave a wait up since it took the tokens, and refuses work until its error is reported: it has run
    // or dropped every one of them, so none can land after these. Raised here, and the call goes on: its caller's
    // stream, whose dropped point made the side stream give up, reports the failure (found by review: the tokens
    // were lost in this window).
    for (const int peer : token_peers_) {
      try {
        comm_.raise_signal_from_host(peer, comm::kCollectiveTokenSlot);
      } catch (const std::exception& e) {
        PICKLE_LOG(Debug, "coll", prefix_ << ": its stream refused a callback behind the tokens (" << refused.what()
                                          << "), and peer " << peer << "'s could not be raised from the host: "
                                          << e.what());
      }
    }
  }
}

void Call::await_token(int peer) {
  started_ = true;
  const std::uint32_t expected = ++state_.tokens_awaited[static_cast<std::size_t>(peer)];
  comm_.wait_signal_on_stream(lane_stream(peer, kInput).impl(), peer, comm::kCollectiveTokenSlot, expected);
}

void Call::copy_local(void* dst, const void* src, std::size_t bytes) {
  stream().copy(dst, src, bytes);
  comm_.local_copy_bytes += bytes;
}

void Call::copy_beside(void* dst, const void* src, std::size_t bytes) {
  lane_stream(rank(), kInput).impl().copy(dst, src, bytes);  // no peer sends to itself: the slot is free
  comm_.local_copy_bytes += bytes;
  beside_ = true;
  started_ = true;
}

void Call::stream_wait(Request& request) {
  if (request.valid()) wait_on_stream(request, stream_);
}

void Call::stream_wait_later(Request request) {
  if (request.valid()) deferred_.push_back(std::move(request));
}

std::shared_ptr<device::PassedCheck> Call::finish() {
  for (int peer = 0; peer < world(); ++peer) {
    if (const std::uint32_t owed = tokens_owed_[static_cast<std::size_t>(peer)]; owed != 0) {
      throw Error(ErrorCode::Internal, cat(describe(ctx_), ": the ordered schedule raised ", owed,
                                           " token(s) fewer to peer ", peer, " than the call planned"));
    }
  }
  hear_of_dropped_tokens();
  if (beside_) {
    if (!state_.beside_done) state_.beside_done = device::make_ordering_event(comm_.kind, std::max(0, comm_.device));
    side_stream(rank(), kInput).impl().record(*state_.beside_done);
    stream().wait(*state_.beside_done);
    beside_ = false;
  }
  for (auto& lane : last_on_side_) {
    for (auto& request : lane) stream_wait(request);
  }
  for (auto& request : end_waits_) wait_on_stream(request, stream_);
  end_waits_.clear();
  for (auto& request : deferred_) wait_on_stream(request, stream_);
  deferred_.clear();
  if (recvs_.empty() && sends_.empty() && signal_waits_.empty()) return nullptr;
  // A peer that dies releases the stream's waits on its data and its ready signal (so that nothing hangs), and
  // neither came: this check, run once the stream has passed the call, makes the stream's next synchronize report
  // it. Sends too: one whose write a net transport refused fails (and fails the pair) with every receive of this
  // rank's call intact, and its data never reached the peer. Not a host callback: that would hold the stream for a
  // round trip through a host thread at the end of every collective. The pairs' failure records are taken now (the
  // check runs at the latest in the communicator's teardown, settle_stream_checks).
  struct WaitCheck {
    std::shared_ptr<PairFailure> record;
    OpContext ctx;
    int slot;
    std::uint32_t expected;
  };
  std::vector<WaitCheck> waits;
  for (const SignalWait& wait : signal_waits_) {
    // The record is made with the peer's state and never replaced: no lock to take it (as check_wait).
    waits.push_back(WaitCheck{comm_.peers[static_cast<std::size_t>(wait.peer)].failure_record,
                              OpContext{.rank = rank(), .peer = wait.peer, .op = "wait"}, wait.slot, wait.expected});
  }
  // Last, a loss of this call's data on this rank or a peer of its host (Communicator::Impl::collective_loss): a
  // peer whose receive failed went on without it, and what this rank got from it may be computed from anything. Read
  // here, once the stream has passed the call: the peer noted it before its stream could pass on anything. The check
  // runs at the latest in the teardown (settle_stream_checks), before the signal words go, so `comm` is still there.
  // A step of a two-level collective names its peer as a rank of the communicator the application called, as the
  // errors it throws on the host do (rethrow_from_group).
  std::shared_ptr<device::PassedCheck> check = comm_.check_when_passed(stream(), prefix_,
                          [recvs = std::move(recvs_), sends = sends_, waits = std::move(waits), prefix = prefix_,
                           comm = &comm_, call = number_]() mutable {
                            try {
                              try {
                                for (auto& request : recvs) request.test();
                                for (auto& request : sends) request.test();
                                for (const WaitCheck& wait : waits) {
                                  Communicator::Impl::throw_if_released(*wait.record, wait.ctx, wait.slot,
                                                                        wait.expected);
                                }
                              } catch (const Error& e) {
                                rethrow_with_prefix(e, prefix);
                              }
                            } catch (const PeerError& e) {
                              // A two-level step's group (only steps run on one) names its peer as a rank of the
                              // application's communicator.
                              if (comm->family_ranks.empty()) throw;
                              throw PeerError(e.message(), comm->family_rank(e.peer()));
                            }
                            // Its peer is the application's communicator's rank already.
                            if (auto loss = comm->collective_loss(call, prefix)) throw *loss;
                          });
  recvs_.clear();
  signal_waits_.clear();
  return check;
}

void Call::abandon() noexcept {
  // Sends whose data a transport's own stream copies (shm: into the staging ring, after the side stream's point)
  // read the caller's buffers until they complete; they complete, or fail and are released, even when the call
  // failed, since every send of a call was matched before it was issued.
  for (auto& send : sends_) {
    try {
      wait_on_stream(send, stream_);
    } catch (const std::exception& e) {
      PICKLE_LOG(Debug, "coll", prefix_ << ": after the failure, a send could not be waited for: " << e.what());
    }
  }
  // The ordered pipeline's tokens this call still owes: a peer's copy into a third rank may wait for one on its
  // stream, and only the pair's failure (not this call's) would release it. Tokens order copies and never guard data,
  // so raising them now is safe; all at once (one write of the final count, not one message per token over shm and
  // net), on the lane's stream after the tokens raised before, so that the counts the peer's word sees only grow.
  // Not to a peer whose pair failed: its waits on this rank were released.
  for (int peer = 0; peer < world(); ++peer) {
    const std::uint32_t owed = tokens_owed_[static_cast<std::size_t>(peer)];
    if (owed == 0) continue;
    try {
      comm_.check_peer_alive(peer, ctx_);
      comm_.signal_peer(side_stream(peer, kInput).impl(), peer, comm::kCollectiveTokenSlot, owed);
    } catch (const std::exception& on_stream) {
      // The stream refused them (a host stream that gave a wait up, which also dropped what it held of them): the
      // counts were taken, so raise them from the host. Not on CUDA: a refusing CUDA stream failed its context,
      // and its earlier writes may still be queued (they would move the word back behind this one).
      std::string from_host = "not on CUDA memory";
      if (kind() == MemoryKind::Host) {
        try {
          comm_.raise_signal_from_host(peer, comm::kCollectiveTokenSlot);
          continue;
        } catch (const std::exception& e) {
          from_host = e.what();
        }
      }
      PICKLE_LOG(Debug, "coll", prefix_ << ": after the failure, peer " << peer << "'s tokens could not be raised: "
                                        << on_stream.what() << "; from the host: " << from_host);
    }
  }
  try {
    hear_of_dropped_tokens();  // the stream may still drop the ones it accepted
  } catch (const std::exception& e) {
    PICKLE_LOG(Debug, "coll", prefix_ << ": after the failure, no callback could follow the tokens: " << e.what());
  }
  auto join = [&](const std::optional<Stream>& side) {
    if (!side) return;
    try {
      auto done = device::make_ordering_event(comm_.kind, std::max(0, comm_.device));
      side->impl().record(*done);
      stream().wait(*done);
    } catch (const std::exception& e) {
      PICKLE_LOG(Warn, "coll", prefix_ << ": after the failure, the stream could not be ordered after the side "
                                          "streams: " << e.what());
    }
  };
  for (const auto& lane : state_.side) {
    for (const auto& side : lane) join(side);
  }
  // The lanes' shared streams too (share_side_streams): a send whose failure made on_stream throw above may still
  // have a staging copy queued there that reads the caller's buffer (found by review).
  for (const auto& side : state_.shared_side) join(side);
}

// --- argument checks

std::size_t checked_bytes(const OpContext& ctx, std::size_t count, DataType type, std::size_t multiple) {
  const std::size_t element = datatype_size(type);
  if (count != 0 && count > SIZE_MAX / element / std::max<std::size_t>(1, multiple)) {
    throw InvalidArgument(cat(describe(ctx), ": ", count, " elements of ", datatype_name(type), " x ", multiple,
                              " do not fit in a size_t (count overflow)"));
  }
  return count * element * multiple;
}

void check_stream(const Communicator::Impl& comm, const OpContext& ctx, const Stream& stream) {
  if (stream.kind() != comm.kind || (comm.kind == MemoryKind::Cuda && stream.device() != comm.device)) {
    throw InvalidArgument(cat(describe(ctx), ": the stream is a ", memory_kind_name(stream.kind()),
                              " stream of device ", stream.device(), "; this communicator uses ",
                              memory_kind_name(comm.kind), " device ", comm.device));
  }
}

void check_buffer(const Communicator::Impl& comm, const OpContext& ctx, const void* ptr, std::size_t bytes,
                  const char* which) {
  if (bytes == 0) return;
  if (ptr == nullptr) throw InvalidArgument(cat(describe(ctx), ": the ", which, " buffer is null"));
  device::AllocationInfo found;
  try {
    found = device::find_allocation(ptr);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(cat(describe(ctx), ": the ", which, " buffer is not memory pickle can share (",
                              without_head(e.what()),
                              "); use Communicator::alloc, cudaMalloc or pickle-allocated host memory"));
  }
  if (found.kind != comm.kind) {
    throw InvalidArgument(cat(describe(ctx), ": the ", which, " buffer is ", memory_kind_name(found.kind),
                              " memory but this communicator moves ", memory_kind_name(comm.kind), " memory"));
  }
  if (found.kind == MemoryKind::Cuda && found.device != comm.device) {
    throw InvalidArgument(cat(describe(ctx), ": the ", which, " buffer is on GPU ", found.device,
                              " but this communicator uses GPU ", comm.device));
  }
  if (found.offset > found.bytes || bytes > found.bytes - found.offset) {
    throw InvalidArgument(cat(describe(ctx), ": the ", which, " buffer needs ", bytes, " bytes but its allocation has ",
                              found.bytes - std::min(found.offset, found.bytes), " from the pointer on"));
  }
}

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) noexcept {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// --- cutting

std::size_t Blocks::max_length() const noexcept {
  return length.empty() ? 0 : *std::max_element(length.begin(), length.end());
}

Blocks split_blocks(std::size_t count, std::size_t element_size, int world) {
  const std::size_t granule = element_size >= 16 ? 1 : 16 / element_size;
  const std::size_t units = ceil_div(count, granule);
  const auto n = static_cast<std::size_t>(world);
  Blocks blocks;
  blocks.offset.resize(n);
  blocks.length.resize(n);
  std::size_t unit = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t mine = units / n + (r < units % n ? 1 : 0);
    const std::size_t begin = std::min(unit * granule, count), end = std::min((unit + mine) * granule, count);
    blocks.offset[r] = begin;
    blocks.length[r] = end - begin;
    unit += mine;
  }
  return blocks;
}

Blocks equal_blocks(std::size_t count, int world) {
  Blocks blocks;
  for (int r = 0; r < world; ++r) {
    blocks.offset.push_back(static_cast<std::size_t>(r) * count);
    blocks.length.push_back(count);
  }
  return blocks;
}

std::size_t chunk_elements(MemoryKind kind, std::size_t max_block, std::size_t element_size, int world,
                           std::size_t fixed_bytes) {
  const ChunkLimits limits = limits_of(kind);
  const std::size_t block_bytes = ceil_div(max_block * element_size, kChunkAlign) * kChunkAlign;
  std::size_t bytes =
      ceil_div(ceil_div(max_block * element_size, limits.chunks_per_block), kChunkAlign) * kChunkAlign;
  bytes = std::clamp(bytes, limits.min_bytes, limits.max_bytes);
  if (bytes > limits.whole_block_bytes && limits.whole_block_bytes != 0) {
    // Powers of two from the floor up (CUDA: 16, 32 or 64 MiB): a few scratch layouts for all large sizes, since a
    // new slot size drains the scratch's earlier reductions (Scratch::prepare; found by review).
    bytes = std::bit_floor(bytes);
  }
  bytes = std::max(bytes, std::min(block_bytes, limits.whole_block_bytes));
  if (fixed_bytes != 0) bytes = fixed_bytes;
  // All stages of all peers within the ceiling (many ranks: smaller chunks).
  const std::size_t per_slot = limits.scratch_bytes / (static_cast<std::size_t>(kStages) *
                                                       static_cast<std::size_t>(std::max(1, world - 1)));
  bytes = std::min(bytes, std::max(kChunkAlign, per_slot / kChunkAlign * kChunkAlign));
  return bytes / element_size;
}

std::size_t two_rank_allreduce_chunk_elements(std::size_t max_block, std::size_t element_size) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t block_bytes = max_block * element_size;
  std::size_t bytes = 0;
  if (block_bytes >= 8 * kMiB && block_bytes <= 16 * kMiB) {
    bytes = block_bytes / 2;
  } else if (block_bytes > 16 * kMiB && block_bytes < 64 * kMiB && element_size <= 2) {
    bytes = ceil_div(block_bytes, ceil_div(block_bytes, 8 * kMiB));  // about 8 MiB, in equal parts: no small last one
  } else {
    return chunk_elements(MemoryKind::Cuda, max_block, element_size, 2);
  }
  bytes = ceil_div(bytes, kChunkAlign) * kChunkAlign;
  return std::max<std::size_t>(1, bytes / element_size);
}

AllreduceAlgorithm allreduce_algorithm(AllreduceSchedule schedule, std::size_t count, std::size_t element_size,
                                       int world, bool one_host) {
  if (world < 2) return AllreduceAlgorithm::Fused;
  switch (schedule) {
    case AllreduceSchedule::Fused: return AllreduceAlgorithm::Fused;
    case AllreduceSchedule::OneShot: return AllreduceAlgorithm::OneShot;
    case AllreduceSchedule::Mailbox: break;  // as auto, which takes the mailboxes wherever they apply
    case AllreduceSchedule::Phased: {
      const Blocks blocks = split_blocks(count, element_size, world);
      const bool blocks_full = std::find(blocks.length.begin(), blocks.length.end(), 0) == blocks.length.end();
      return blocks_full ? AllreduceAlgorithm::Phased : AllreduceAlgorithm::Fused;
    }
    case AllreduceSchedule::Auto: break;
  }
  // Small messages on one host: through the mailboxes (the two-sided one-shot where some pair is not over ipc).
  if (one_host && count <= mailbox_cell_bytes(world) / element_size) return AllreduceAlgorithm::Mailbox;
  // Small messages on one host: the host's work per call sets the pace, and one-shot has half the steps. Not across
  // hosts, where the n - 1 copies of the input would cross a network of a few GB/s (and nothing measured it there).
  const auto peers = static_cast<std::size_t>(world - 1);
  if (one_host && count <= kOneShotAllreduceMaxSent / element_size / peers) return AllreduceAlgorithm::OneShot;
  // Two ranks: one peer, so nothing to stagger, and the fused pipeline overlaps the halves (1.10x NCCL at 1 GiB on
  // 2 x H200). Small blocks: the second call's fixed cost outweighs the gain.
  const std::size_t block_bytes = count / static_cast<std::size_t>(world) * element_size;
  const bool phased = world >= 3 && one_host && block_bytes >= kPhasedAllreduceMinBlock;
  return phased ? AllreduceAlgorithm::Phased : AllreduceAlgorithm::Fused;
}

std::size_t mailbox_cell_bytes(int world) {
  if (world < 2) return 0;
  return kOneShotAllreduceMaxSent / static_cast<std::size_t>(world - 1) / kChunkAlign * kChunkAlign;
}

}  // namespace pickle::coll
