#pragma once
// The state behind pickle::Communicator. One mutex guards matching and per-peer bookkeeping; the progress thread
// (progress.cpp) reads every control channel and feeds the same state. Sends on a channel hold that channel's send
// mutex only (never the state mutex), so that two ranks sending to each other can never block each other.

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "comm/control.hpp"
#include "comm/landed_prefix.hpp"
#include "comm/signal_area.hpp"
#include "comm/staging_pool.hpp"
#include "core/format.hpp"
#include "core/serial_worker.hpp"
#include "core/unique_fd.hpp"
#include "device/fd_channel.hpp"
#include "device/host/backoff.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "transport/ipc/ipc_transport.hpp"
#include "transport/select.hpp"
#include "transport/shm/shm_transport.hpp"
#ifdef PICKLE_HAVE_LIBFABRIC
#include "transport/net/net_transport.hpp"
#endif

namespace pickle {

using comm::ControlMessage;
using comm::ExportMessage;
using comm::GoodbyeMessage;
using comm::RecvPostMessage;
using comm::SendFailedMessage;
using comm::NetEmptySendMessage;
using comm::ReleaseMessage;
using comm::NetPutMessage;
using comm::NetPutFailedMessage;
using comm::NetSignalMessage;
using comm::ShmPutMessage;
using comm::ShmSendMessage;
using comm::ShmSignalMessage;
using comm::kCompletionSlots;
using comm::kPeerSignalSlots;

/// Why a send failed whose stream accepted its step (a host callback: an shm send's "source ready", a net send's
/// pieces) and then dropped it unrun. The stream's own error says what gave up; its synchronize reports it.
inline constexpr std::string_view kDroppedByItsStream =
    "its stream dropped the send before running it (a wait queued ahead of the send gave up; the stream's "
    "synchronize reports why)";

/// A pair's failure as the checks after waits see it (Communicator::Impl::check_wait), written once when the pair
/// fails: each user signal slot's value before the failure released it (a wait for more was released, not
/// signalled), and the first of the peer's net puts that had not landed ("" if none).
struct PairFailure {
  std::mutex mutex;
  bool failed = false;
  std::string reason;
  std::vector<std::uint32_t> signals = std::vector<std::uint32_t>(kPeerSignalSlots, 0);
  std::string net_put_missing;
  /// The pair was failed because a watched wait on the peer's signals saw no progress for PICKLE_TIMEOUT (the peer
  /// may be alive): released waits report a TimeoutError rather than a PeerError.
  bool timed_out = false;
  /// shm: the peer's "gave up" word (transport/shm/staging_ring.hpp), read through here while the transport exists;
  /// its last value is kept once the transport goes (the communicator's close).
  const std::uint32_t* peer_gave_up_word = nullptr;
  bool peer_gave_up_at_close = false;
  /// Whether the peer gave its side of an shm pair up, so that what its rings deliver from then on cannot be trusted
  /// (mutex held; read after the completion it qualifies).
  bool peer_gave_up() const noexcept {
    return peer_gave_up_word != nullptr ? device::host::load_acquire(peer_gave_up_word) != 0 : peer_gave_up_at_close;
  }
};

/// Shared by a Request and the communicator.
struct RequestState {
  enum class Kind { Send, Recv };
  Kind kind = Kind::Send;
  Communicator::Impl* comm = nullptr;
  OpContext ctx;  // rank, peer, "send"/"recv", bytes
  int tag = 0;
  std::uint64_t seq = 0;
  // A collective's message (Call::recv, Call::send): its call's number in the family (Call::number); 0 for the
  // application's. A collective receive whose word a failure moves lets streams go on without its data, into the
  // call's later messages to third ranks: Impl::note_collective_loss_locked tells them first.
  std::uint64_t collective_call = 0;

  // Send: set once the send is matched (its slot and generation known; its copy is queued right after, outside the
  // lock: MatchedSend). Its completion is the receiver's completion word (which the sender maps
  // too) reaching the generation of the matched post: no event per message. Over net and shm, the sender's own
  // "sent" word for that slot (the receiver's word may be on another host; over shm the receiver's stream writes
  // both, and a peer failure releases the sender's own word without writing into the peer's memory).
  bool enqueued = false;
  // Send over shm: the ring's chunks are reserved only once the send is matched and its source is ready (its
  // stream has reached the call), whichever comes last, so that ring order follows readiness: a send reserved at
  // call time behind a stream that waits on the peer would hold up every later message to that peer.
  // kShmRefused: the caller's stream refused the source-ready step (Impl::refuse_shm_send), which counts as taken.
  static constexpr int kShmMatched = 1, kShmSourceReady = 2, kShmRefused = 4;
  std::atomic<int> shm_state{0};
  // Whether, while it waits for its post, it counts in Impl::unmatched_sends: not once its stream refused it
  // (refuse_shm_send takes it out then; guarded by Impl::mutex, as that is).
  bool counts_as_unmatched() const { return (shm_state.load() & kShmRefused) == 0; }
  std::shared_ptr<device::Event> after_event;     // the caller's stream at send() time, for a copy on another stream
  // The stream that carries the copy and (unless lane_write says otherwise) its completion write (ipc sends only).
  // Later work on that same stream is ordered after both already, so on_stream() with it enqueues nothing: a stream
  // wait on a word in host memory costs about 1.8 us even when the word is already there
  // (docs/results/2026-11-24-h100x1.md).
  std::uint64_t copied_on = 0;  // device::Stream::serial(); 0: none
  // Where its completion write went when not onto `copied_on` itself (a burst's send on CUDA: completion_lanes.hpp);
  // on_stream() with that stream then joins the lane (guarded by Impl::mutex).
  transport::ipc::CompletionLanes::Written lane_write;
  const void* src = nullptr;
  void* dst = nullptr;  // Recv: where the data goes (the shm transport's receiving stream copies it there)
  std::uint64_t alloc_id = 0;  // Recv over ipc: the announced allocation the data goes into
  // Recv over net, staged (GPU memory): the pinned buffer the data lands in (guarded by Impl::mutex once posted).
  // Handed to the staging stream when the data has landed, which returns it to the pool once copied into place; a
  // failed receive's goes to Impl::quarantined instead.
  std::shared_ptr<std::byte> staging;
  // Recv over net, staged: all of it landed and its copy into place is queued (guarded by Impl::mutex). A peer that
  // fails after that does not fail the receive: it completes when the copy does, so the copy never writes into a
  // buffer that the application freed after a PeerError.
  bool landed = false;
  // Recv over net, staged: how many of its pieces (comm/net_pieces.hpp) landed and had their copy into place queued
  // (guarded by Impl::mutex). A receive that fails with some queued reports its failure only once they ran
  // (fail_recv_after_copies_locked), so that no copy writes into its buffer after the application heard.
  std::size_t pieces_copied = 0;
  // test() returned true once (guarded by Impl::mutex): it does so from then on, whatever happens to the pair later.
  bool reported_complete = false;
  // Over shm, it had not completed when its failed pair's release began (guarded by Impl::mutex;
  // mark_unfinished_with_locked): what the release lets through may move its word, but it fails (fail_peer_locked),
  // and neither test() nor the checks of report_on_stream take the word for its completion.
  bool unfinished_at_release = false;
  // Request::on_stream left a check of its outcome on the streams it made wait (report_on_stream; guarded by
  // Impl::mutex): the teardown's release need not add its own.
  bool reported_on_streams = false;
  // It failed alone, its pair going on (a size mismatch, a send the sender could not write or queue; guarded by
  // Impl::mutex): the teardown leaves its error as it is (retire_signal_area).
  bool failed_alone = false;

  // Both: the completion slot (of the receiver) and the generation that marks this message delivered.
  int slot = -1;
  std::uint32_t generation = 0;

  std::exception_ptr error;  // guarded by Impl::mutex
  // The streams that on_stream() made wait on this request's word (guarded by Impl::mutex): if the communicator is
  // destroyed before the request completed, each is told so through its next synchronize (Impl::retire_signal_area).
  std::vector<std::weak_ptr<device::Stream>> waiting_streams;
};

struct WindowState {
  const Communicator::Impl* owner = nullptr;  // the communicator that registered it: a window works there only
  int id = -1;
  void* local = nullptr;
  struct Entry {
    std::uint64_t alloc_id = 0;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    std::uint64_t net_addr = 0;  // net transport: the registration a peer RMA-writes into
    std::uint64_t net_key = 0;
  };
  std::vector<Entry> ranks;
  std::shared_ptr<std::byte> staging;  // net with staging: where peers' puts land before they are copied into place
};

/// The collectives of a communicator and of the host groups its two-level collectives run on (host_groups): one
/// count of the application's collective calls, and the first of them in which this rank lost data
/// (collective_loss.cpp). A loss in one step of a two-level collective must fail the ranks that the next step, on
/// the other group's communicator, passes its result to. Numbered per application call (coll::NumberedCall), not
/// per step: a rank runs only the steps it takes part in (a two-level broadcast's across-hosts step runs on the
/// root's index only), and numbers per step went apart between the ranks of a host (found by review).
/// Rank `in_group` of a group whose ranks are `ranks` (in group order), as a rank of the communicator it was split
/// from; -1 if none.
inline int rank_outside_group(int in_group, const std::vector<int>& ranks) {
  return in_group >= 0 && static_cast<std::size_t>(in_group) < ranks.size() ? ranks[static_cast<std::size_t>(in_group)]
                                                                             : -1;
}

struct CollectiveFamily {
  // The fields up to `broken_peer` are the application's thread's: a communicator's collectives are issued from one
  // thread (docs/collectives.md), as NCCL's are.
  std::uint64_t calls = 0;    // application calls begun so far
  int depth = 0;              // application calls under way: 1, or 2 inside a two-level step (NumberedCall)
  std::uint64_t current = 0;  // the number of the one under way
  bool current_started = false;  // some step of it sent or posted a message: its number is kept if it fails
  /// During a step of a two-level collective (coll::run_in_group): "rank 3: allreduce of 64 bytes: among the ranks
  /// of this host (2, 3)", in front of the errors the step's end check reports on the stream later.
  std::string step_prefix;
  /// Set when a call failed after its first message (coll::mark_broken): the ranks' message sequences are out of
  /// step, so every later collective of the family fails fast with this reason (coll::check_not_broken).
  std::optional<std::string> broken;
  ErrorCode broken_code = ErrorCode::Internal;
  int broken_peer = -1;
  std::atomic<std::uint64_t> lost_from{0};  // the number of the first call in which this rank lost data; 0: none
  std::mutex mutex;                         // guards lost_from's writes and what follows
  int lost_peer = -1;                           // the peer of the lost message, as a rank of the first communicator
  std::string lost_why;                         // its failure
  std::vector<Communicator::Impl*> members;     // from the end of their construction to the start of their teardown
};

struct Communicator::Impl {
  /// Where a communicator made by split() meets its ranks: the parent's store (the job's), under a key prefix of
  /// its own. Its barriers cannot be the store's (those count every rank of the job): see store_barrier.
  struct SplitFrom {
    std::shared_ptr<Store> store;
    std::string key_prefix;
  };
  /// `split_from`: null for a communicator of the whole job (its store is the job's, found from rank_info).
  explicit Impl(Options options, const SplitFrom* split_from = nullptr);
  ~Impl();
  /// The Impl behind a communicator (the two-level collectives run internal calls on their groups).
  static Impl& of(Communicator& comm) noexcept { return *comm.impl_; }

  // --- point to point (p2p.cpp)
  /// `collective_call`: RequestState::collective_call (0: the application's message).
  Request send(int peer, int tag, const void* ptr, std::size_t bytes, Stream* after,
               std::uint64_t collective_call = 0);
  Request recv(int peer, int tag, void* ptr, std::size_t bytes, std::uint64_t collective_call = 0);
  /// What a matched send leaves for its caller to do once the state mutex is released (finish_matched_send):
  /// `enqueue` queues its stream operations, which must not happen under the mutex (queuing on a full stream waits
  /// until the stream ran some of its work, whose host callbacks may take the mutex, or which may wait for a signal
  /// that the progress thread delivers under it) and returns the failure to tell the peer, if any; then `reply` goes
  /// to the peer.
  struct MatchedSend {
    std::shared_ptr<RequestState> send;
    std::function<std::optional<ControlMessage>()> enqueue;
    std::optional<ControlMessage> reply;
  };
  /// Starts the copy of a matched send (state mutex held): for an ipc or net peer, `enqueue` queues the copy or the
  /// pieces on `stream` (which must outlive the call); an shm send takes its place in the staging ring. `reply`: the
  /// failure (SendFailedMessage) or, for shm, where the data sits in the ring (ShmSendMessage).
  MatchedSend start_copy(int peer, const std::shared_ptr<RequestState>& send, const RecvPostMessage& post,
                         device::Stream& stream);
  /// Runs what start_copy left (no lock held): the enqueue, then the message to the peer, sent at once from an
  /// application thread or through the outbox from the progress thread (`from_progress_thread`).
  void finish_matched_send(int peer, MatchedSend& matched, bool from_progress_thread);
  /// The ipc part of a matched send that start_copy left: the wait for the caller's stream (a send matched later),
  /// the copy into the peer's buffer, the write of its completion word. A failure to queue fails the send.
  std::optional<ControlMessage> enqueue_ipc_copy(const std::shared_ptr<RequestState>& send, void* dst,
                                                 device::Stream& stream);
  /// An ipc send's copy and completion write that a host stream dropped unrun (the hook of enqueue_ipc_copy): the
  /// send fails alone and its receiver hears it (unless it failed already, or the write ran after all).
  void fail_dropped_ipc_send(const std::shared_ptr<RequestState>& send, const device::Stream* dropped_by);
  /// Makes `stream`, where a send matched later is queued, wait for the caller's stream's point at send()
  /// (`send.after_event`, if any); throws if that point will never be reached.
  static void wait_for_callers_point(const RequestState& send, device::Stream& stream);
  /// The message that tells the peer its receive will not get `send`'s data (`cause` says why).
  static SendFailedMessage send_failed_message(const RequestState& send, const Error& cause);
  /// An shm send's step towards the ring (`step`: RequestState::kShmMatched or kShmSourceReady): the step that
  /// completes the pair reserves the chunks and returns the ShmSendMessage to send the peer.
  std::optional<ControlMessage> shm_send_step(int peer, const std::shared_ptr<RequestState>& send, int step);
  /// An shm send whose stream refused its source-ready callback, or accepted and then dropped it unrun (`cause`):
  /// fails it alone and tells the receiver. `post_message`: the message goes out through the outbox instead of being
  /// written here (for a dropped callback, let go on a stream's thread, which must not block on the channel).
  void refuse_shm_send(int peer, const std::shared_ptr<RequestState>& send, const Error& cause, bool post_message);
  /// Whether `peer` is reached through the ipc transport (copy engines into its mapped memory).
  bool uses_ipc(int peer) const { return !uses_shm(peer) && !uses_net(peer); }
  /// Whether `peer` is reached through the shm transport. From the choice made at creation, so that a transport's
  /// thread reporting its own peer's failure (fail_peer) never reads the other transport's pointer, which the
  /// teardown resets while that thread may still run.
  bool uses_shm(int peer) const { return chose(peer, transport::Kind::Shm) && shm; }
  /// Whether `peer` is reached through the net transport (never in a build without libfabric).
  bool uses_net(int peer) const {
#ifdef PICKLE_HAVE_LIBFABRIC
    return chose(peer, transport::Kind::Net) && net;
#else
    (void)peer;
    return false;
#endif
  }
  /// Whether creation chose the transport `wanted` for `peer`.
  bool chose(int peer, transport::Kind wanted) const {
    return peer != info.rank && peer >= 0 && peer < static_cast<int>(transports.size()) &&
           transports[static_cast<std::size_t>(peer)].kind == wanted;
  }
  /// Whether a send to `peer` that is matched at call time runs its copy and completion write on the stream given to
  /// send() (ipc, one copy stream per peer): such sends on one stream then complete in order.
  bool sends_join_given_stream(int peer) const { return uses_ipc(peer) && ipc->joins_caller_stream(); }
  /// The net transport's id of piece `piece` (comm/net_pieces.hpp) of the message that completes recv `slot` at
  /// `generation`: slot in bits 19-30, piece in 16-18, generation's low 16 bits below (below 2^31: put ids have the
  /// top bit set). A slot is reused only after its message arrived, so an id is never live twice.
  static std::uint32_t net_recv_message(int slot, std::uint32_t generation, std::size_t piece) {
    return (static_cast<std::uint32_t>(slot) << 19) | (static_cast<std::uint32_t>(piece) << 16) |
           (generation & 0xffffu);
  }
  /// The net path of a matched send (net_path.cpp): an RMA write of the data straight into the posted buffer,
  /// issued from `stream` once it reaches this point; the receiver's transport sees it land and completes the recv,
  /// this rank's sees the writes complete and sets the send's "sent" word. A zero-byte send writes nothing: when the
  /// stream reaches it, it completes and sends the message that completes the recv. A write that the transport
  /// refuses fails the send there (fail_net_send). In two steps: claim_net_send (state mutex held) takes the posted
  /// slot; enqueue_net_send (without it) queues the stream operations.
  MatchedSend claim_net_send(int peer, const std::shared_ptr<RequestState>& send, const RecvPostMessage& post,
                             device::Stream& stream);
  void enqueue_net_send(int peer, const std::shared_ptr<RequestState>& send, const RecvPostMessage& post,
                        device::Stream& stream);
  /// The receiver's side of a net recv, in two steps. First, before the recv takes its slot and sequence number
  /// (what may fail for want of resources, and must then fail this recv alone): registers the buffer (cached) or,
  /// staged, takes a pinned buffer from the pool into `recv.staging` and registers that; returns the posted region's
  /// address and key. Then, once the slot is taken: expects the message, and completes the recv when it landed.
  std::pair<std::uint64_t, std::uint64_t> prepare_net_recv(RequestState& recv);
  void expect_net_recv(int peer, RequestState& recv);
  /// One piece of a staged net recv that landed in its staging buffer, to be copied into place.
  struct StagedPiece {
    int peer;
    int slot;
    std::uint32_t generation;
    std::byte* landed;  // where it landed (in the staging buffer)
    std::byte* dst;     // where it goes
    std::size_t length;
    std::size_t pieces;  // of the whole receive
  };
  /// On the staging enqueuer: queues the piece's copy into place on the staging stream and, after the last piece's,
  /// the completion word and the staging buffer's return to the pool (not for a receive that failed meanwhile).
  void copy_staged_piece(const StagedPiece& piece);
  /// Fails a staged net recv some of whose pieces' copies into place are queued (pieces_copied > 0, not landed): the
  /// error and the released word come from the staging stream once those copies ran, queued through the staging
  /// enqueuer (mutex held). False when it cannot be deferred (the teardown drained the stream): fail it at once.
  bool fail_recv_after_copies_locked(const std::shared_ptr<RequestState>& recv, std::exception_ptr error);
  void handle_net(int peer, const NetPutMessage& message);
  void handle_net(int peer, const NetSignalMessage& message);
  void handle_net(int peer, const NetEmptySendMessage& message);
  /// The peer could not write a put it had announced: the pair fails here too, with the peer's reason.
  void handle_net(int peer, const NetPutFailedMessage& message);
  /// Sets the signals of `peer` whose puts have all landed (state mutex held).
  void release_net_signals(int peer);
  /// put and signal over the net transport, stream-ordered.
  void net_put(device::Stream& stream, const WindowState& window, int peer, std::size_t dst_offset, const void* src,
               std::size_t bytes);
  void net_signal(device::Stream& stream, int peer, int slot, std::uint32_t value);
#ifdef PICKLE_HAVE_LIBFABRIC
  /// A net put's RMA write, from its stream callback: returns once the source has been read, throws when the write
  /// cannot be made or the pair fails first.
  void write_net_put(transport::net::NetTransport& transport, int peer, const void* src,
                     transport::net::RemoteRegion dst, std::uint32_t message, const OpContext& ctx);
#endif
  /// A matched net send whose write could not be made (the transport threw `cause` from its stream callback):
  /// fails the send, releases its "sent" word (streams waiting on it go on) and tells the receiver why. With
  /// `partly_written` (a staged send's earlier pieces left) the pair fails too, on both sides.
  void fail_net_send(int peer, const std::shared_ptr<RequestState>& send, const Error& cause, bool partly_written);
  /// A net put numbered and announced (message id `message`) that will never be written, for `cause`: fails the
  /// pair, tells the peer why (NetPutFailedMessage), and rethrows the cause for the put's stream.
  [[noreturn]] void fail_net_put(int peer, std::uint32_t message, const OpContext& ctx, const Error& cause);
  /// After a wait on a peer's signal (device::Stream::check_when_passed; the check reads only the pair's
  /// PairFailure, so it needs no settling at teardown): a wait that the failure of the pair released, rather than the
  /// signal, makes the stream's next synchronize throw PeerError (naming the net put that had not landed, if any).
  void check_wait(device::Stream& stream, int peer, int slot, std::uint32_t expected);
  /// What check_wait's check does, for any wait on `ctx.peer`'s signal `slot`: PeerError when the pair's failure
  /// released the wait before the signal reached `expected`.
  static void throw_if_released(PairFailure& record, const OpContext& ctx, int slot, std::uint32_t expected);
  /// Raises `peer`'s signal `slot` (the application's, or the collectives' ready and token slots) by `by` (one
  /// signal, or several at once with one write: the words hold counts), stream-ordered, over the pair's transport;
  /// returns the new count (the value a wait for the last of these signals expects).
  std::uint32_t signal_peer(device::Stream& stream, int peer, int slot, std::uint32_t by = 1);
  /// Delivers `peer`'s signal `slot` at the count signal_peer last took for it, from this thread and on no stream:
  /// for counts whose stream writes a host stream dropped unrun (it gave a wait up) or refused, which nothing would
  /// write otherwise. Over ipc a store into the peer's word, over shm a marker in the ring, over net a message. Only
  /// for slots that order work and guard no data (the pipeline's tokens): the count arrives whether or not what it
  /// was to follow ran, so the caller must know that no stream still holds an earlier count of the slot unwritten.
  /// Throws when the pair has failed (its waits were released then). Waits for the pair's signal-order lock: not
  /// from a stream's thread (raise_signals_from_outbox).
  void raise_signal_from_host(int peer, int slot);
  /// raise_signal_from_host for each of `peers`, from the outbox's thread, for a stream's thread (a drop hook): that
  /// thread must not wait for a signal-order lock, which an application thread may hold while it waits for room on
  /// that very stream; nor may the outbox's (the messages behind it would wait too), so a peer whose lock is taken
  /// is tried again from the back of the outbox's queue.
  void raise_signals_from_outbox(std::vector<int> peers, int slot, int attempt = 0);
  /// What both deliver, the caller holding the pair's signal-order lock.
  void deliver_latest_signal(int peer, int slot);
  /// signal_peer (by one) for each of `peers`, every one on this host over ipc, with one batched stream write
  /// (device::Stream::write_values) that also carries `also` (words outside the signal area, written in the same
  /// operation); returns their new counts, in the order of `peers`.
  std::vector<std::uint32_t> signal_peers(device::Stream& stream, std::span<const int> peers, int slot,
                                          std::span<const device::Stream::Flag> also = {});
  /// signal_peers' counts for signals that a kernel on `stream` writes itself (a gated reduction, ReduceGate),
  /// taken and noted as signal_peers takes them, and nothing enqueued; the caller passes the returned counts and the
  /// peers' words (signals->remote_word_for_streams) to the kernel.
  std::vector<std::uint32_t> count_signals_written_by_kernel(device::Stream& stream, std::span<const int> peers,
                                                             int slot);
  /// The next count of `slot` for each of `peers` (over ipc, on this host), with `stream` noted for teardown (takes
  /// the mutex; the caller holds the pairs' signal-order locks).
  std::vector<std::uint32_t> next_signal_counts(device::Stream& stream, std::span<const int> peers, int slot);
  /// The signal-order locks of `peers` (signal_order_mutex), under which signal_peers takes and writes their counts.
  std::vector<std::unique_lock<std::mutex>> lock_signal_order(std::span<const int> peers);
  /// put and signal over the shm transport (shm_path.cpp), stream-ordered: each takes its ring place when its
  /// stream reaches it, so that a put or signal held up by its stream holds up no later message to the peer.
  void shm_put(device::Stream& stream, const WindowState& window, int peer, std::size_t dst_offset, const void* src,
               std::size_t bytes);
  void shm_signal(device::Stream& stream, int peer, int slot, std::uint32_t value);
  /// shm_signal's and net_signal's message, sent from this thread now.
  void send_shm_signal(int peer, int slot, std::uint32_t value);
  void send_net_signal(int peer, int slot, std::uint32_t value);
  /// The word that marks `request` complete, as the host reads it, and as streams address it.
  std::uint32_t completion_value(const RequestState& request) const;
  std::uint32_t* completion_word_for_streams(const RequestState& request) const;
  /// The same word as the host reads it (completion_value loads it).
  const std::uint32_t* completion_word_for_host(const RequestState& request) const;
  /// Communicator::register_memory (collective): also how the collectives' mailboxes (src/collectives/mailbox.cpp)
  /// make their cells known to the peers.
  std::shared_ptr<const WindowState> register_window(void* ptr, std::size_t bytes);
  /// Announces (once per peer) the allocation that contains `ptr`; returns its id and the pointer's offset.
  std::pair<std::uint64_t, std::uint64_t> announce(int peer, const void* ptr, std::size_t bytes, const OpContext& ctx);
  /// Before a new announcement to `peer`: tells it to unmap the allocations announced earlier that are gone (freed),
  /// except those that a window uses or an outstanding receive still waits on. The caller holds the peer's channel
  /// send lock. Without this a peer's mappings, and the memory they hold, grow with every buffer ever received into.
  void release_freed_allocations(int peer);
  bool test(RequestState& request);
  /// `request`'s peer gave its side of their shm pair up (PairFailure::peer_gave_up): fails the pair on this side too
  /// (what is pending with the peer fails), and then `request`, which may have completed with stale bytes: throws,
  /// unless another thread's test() reported it complete meanwhile (then true).
  bool fail_because_peer_gave_up(RequestState& request);
  /// PairFailure::peer_gave_up for `peer`.
  bool peer_gave_up(int peer) const;
  /// Why operations with a peer that gave their shm pair up fail.
  static std::string gave_up_text(int rank, int peer);
  /// Before the shm transport goes: each pair's record keeps the peer's "gave up" word's last value.
  void keep_last_gave_up_words();
  void wait(RequestState& request);
  /// Makes later work on `stream` wait for the request (Request::on_stream without its report: the collectives,
  /// which check their own requests once per call). False when nothing was enqueued: a send whose copy and
  /// completion write went onto `stream` itself.
  bool on_stream(RequestState& request, device::Stream& stream);
  /// Leaves a check on `stream`, past where on_stream made it wait, that throws the request's failure from the
  /// stream's next query or synchronize (device::Stream::check_when_passed): a release lets the stream through
  /// without the data, and a consumer that only looks at the stream must hear of it. Not under `mutex`.
  void report_on_stream(const std::shared_ptr<RequestState>& request, device::Stream& stream);
  /// The check of report_on_stream (the request's state mutex held): its error, or whether a failure of its pair
  /// took it (a peer that gave its shm pair up, a release begun before it completed); otherwise it completed.
  static void throw_unless_completed_locked(RequestState& request, PairFailure& record);

  // --- control channel (progress.cpp)
  void send_control(int peer, const ControlMessage& message, int fd = -1);
  /// send_control from the progress thread, which must never block on a full socket: it must keep reading, or two
  /// ranks writing to each other at once would both wait forever. The message goes out from `outbox`'s thread.
  void post_control(int peer, ControlMessage message);
  void progress_loop();
  void handle(int peer, ControlMessage message, UniqueFd fd);
  /// The shm transport's messages (receiver side): queue the copies out of the staging ring.
  void handle_shm(int peer, const ShmSendMessage& message);
  void handle_shm(int peer, const ShmPutMessage& message);
  void handle_shm(int peer, const ShmSignalMessage& message);
  /// The peer is gone: every pending operation with it fails and every stream wait on it is released. Over shm the
  /// pair's queued copies are let run through first (ShmTransport::release), so that nothing touches the failed
  /// operations' buffers once the application hears of the failure.
  void fail_peer(int peer, const std::string& reason, bool timed_out = false);
  /// fail_peer for a peer that may be alive and busy (teardown's early release): a shm pair is stopped, its rings
  /// not released (ShmTransport::stop says why), unless a failure of the pair is under way already (the peer died),
  /// which this then joins as fail_peer does. Other transports as in fail_peer (net: its writes are dropped first).
  void fail_peer_that_may_be_alive(int peer, const std::string& reason);
  /// What had not completed with a peer before its shm pair was released (fail_peer): the release lets the pair's
  /// queued copies run through released ring flags, so receives whose chunks never came would complete with whatever
  /// the ring held (and signals queued behind them would be stored, sends marked sent).
  struct UnfinishedWithPeer {
    std::vector<std::uint32_t> signals;  // each user signal slot's value
  };
  /// Marks the peer's unfinished requests (sends in flight, posted receives: RequestState::unfinished_at_release)
  /// and returns its signal slots' values as of now (mutex held). Until fail_peer_locked fails them, test() does not
  /// take their words, which the release may move, for completion.
  UnfinishedWithPeer mark_unfinished_with_locked(int peer);
  /// fail_peer's state changes (mutex held), the first time only. With `before`, what it lists fails even if the
  /// release has since completed it, and the signals count as they stood then.
  void fail_peer_locked(int peer, const std::string& reason, const UnfinishedWithPeer* before = nullptr,
                        bool timed_out = false);
  /// Stops and joins the progress thread.
  void stop_progress();

  // --- collective data lost to a failure (collective_loss.cpp). A collective receive that fails has its word moved
  // so that streams never hang on it (fail_peer_locked, a SendFailedMessage): the rank's stream then goes on without
  // its data, and a reduction or relay passes what the buffer held on to third ranks, whose own messages all arrive.
  // So that they do not take it for a result: before the word moves, this rank notes the call as lost and tells every
  // peer on its host (comm::kCollectiveLossWord), and its net sends of that call and later ones are refused (which
  // fails those pairs on both sides). Every rank's end check of a call (coll::Call::finish) then fails the call when
  // it or a peer on its host lost data in that call or an earlier one: after a loss no collective result is trusted.
  // Calls are numbered across a CollectiveFamily, so that a loss in one step of a two-level collective (on a host
  // group's communicator) also fails the ranks that the next step, on the other group's, passes the result to.
  /// Makes this communicator's collectives count in `family` and share its losses (before its first collective).
  /// `ranks`: its ranks as ranks of the family's first communicator (a host group's; empty: the same numbers).
  /// `step`: which step of the family's two-level calls it runs ("across hosts (ranks 0, 2)"), in front of the
  /// losses it notes, whose text keeps its own numbers (HostGroups::host_step).
  void join_collective_family(std::shared_ptr<CollectiveFamily> family, std::vector<int> ranks = {},
                              std::string step = {});
  /// `peer` of this communicator as a rank of the family's first communicator (family_ranks).
  int family_rank(int peer) const;
  /// Leaves its family (the start of the teardown): losses noted elsewhere no longer write into its signal area.
  void leave_collective_family();
  /// Notes the loss of `request`'s data (mutex held; nothing for an application's message), before its word moves:
  /// a receive's, or a send's that a given-up shm pair may complete at the peer with stale bytes. `reason` names it.
  void note_collective_loss_locked(const RequestState& request, const std::string& reason);
  /// Stores a loss from call `call` into the lost-data word of every peer on this host (the family's mutex held).
  void publish_collective_loss(std::uint64_t call) const;
  /// note_collective_loss_locked for each of `peer`'s collective receives that have not completed (mutex held):
  /// before a release of the pair that may let streams past them. `sends_too`: also for the collective sends to
  /// the peer under way, before this rank gives up a shm pair with a live peer (ShmTransport::give_up), whose
  /// receiving stream the released rings then let complete them with the slots' stale bytes.
  void note_collective_losses_with_locked(int peer, const std::string& reason, bool sends_too = false);
  /// Why collective call `call` (its number in the family) cannot be trusted on this rank: a loss, noted by this
  /// rank or by a peer on this host, in that call or an earlier one. The error's peer() is the rank whose data was
  /// lost, or the peer that lost data, as a rank of the family's first communicator (the application's).
  std::optional<PeerError> collective_loss(std::uint64_t call, const std::string& prefix) const;

  // --- streams that use the signal words, and the end of teardown, which must not free the words under them
  // (stream_words.cpp)
  /// Notes (mutex held) that `stream` was given a wait on, or a write into, a signal word: teardown checks that it has
  /// passed it before the words go. Only streams that a shared_ptr owns are noted: the application's and the
  /// collectives' side streams. The transports' own streams are destroyed before the words anyway.
  void note_stream_on_words_locked(device::Stream& stream);
  /// Enqueues a wait of `stream` for `peer`'s signal `slot` to reach `expected`, noted for teardown (Communicator::wait
  /// and the collectives' ready waits).
  void wait_signal_on_stream(device::Stream& stream, int peer, int slot, std::uint32_t expected);
  /// wait_signal_on_stream for each of `waits` on `slot`, with one batched stream wait (device::Stream::wait_values).
  void wait_signals_on_stream(device::Stream& stream, int slot, std::span<const comm::SignalTarget> waits);
  /// What wait_signals_on_stream notes (for the watch and teardown), also for waits that a kernel on `stream` does
  /// itself (a gated reduction polls the local words, which a failed pair releases as it releases stream waits).
  void note_signal_waits(device::Stream& stream, int slot, std::span<const comm::SignalTarget> waits);
  /// What wait_signal_on_stream notes for teardown and the watch (mutex held).
  void note_signal_wait_locked(device::Stream& stream, int peer, int slot, std::uint32_t expected);
  /// What the application's streams still waited for when teardown began: requests that on_stream() made a stream
  /// wait on and that had not completed, and signal waits whose count had not come. Pairs that had failed already
  /// are left out: their failure released those waits, and the application could hear of it.
  struct StreamWaitsAtClose {
    std::vector<std::shared_ptr<RequestState>> requests;
    struct SignalWait {
      int peer;
      int slot;
      std::uint32_t expected;
    };
    std::vector<SignalWait> signals;
  };
  StreamWaitsAtClose stream_waits_at_close() const;
  /// The last step of teardown, once nothing but the application's streams can touch the signal words any more.
  /// Waits in `at_close` that never completed are released (their pairs fail, as in fail_peer), each stream that
  /// waited on such a request gets a check that throws PeerError naming it (signal waits have theirs: check_wait),
  /// and the signal area is kept, never freed, since a stream may still read it (a CUDA stream that the application
  /// destroyed still runs its work, and no list holds it); an Error log names what was pending. With nothing pending
  /// the area is freed as usual, once every noted stream has passed its current end, or kept if one has not.
  void retire_signal_area(const StreamWaitsAtClose& at_close);
  /// The peers, of pairs not failed yet, that a wait in `at_close` still waits on (mutex held).
  std::set<int> peers_streams_still_wait_on_locked(const StreamWaitsAtClose& at_close) const;
  /// The reason those pairs fail with.
  std::string closed_while_streams_waited(int peer) const;
  /// Fails each of those pairs as fail_peer would, once the transports are gone (mutex held; a pair failed already
  /// is left as it is): every stream wait on its words passes. The first step of retire_signal_area.
  void release_stream_waits_locked(const StreamWaitsAtClose& at_close);
  /// Whether `request` completed (mutex held): no error, and its word reached its generation.
  bool completed_locked(const RequestState& request) const;
  /// Whether `peer`'s signal `slot` had reached `expected` (mutex held); for a failed pair, before its release.
  bool signal_reached_locked(int peer, int slot, std::uint32_t expected) const;
  /// Enqueues `fn`, which uses this communicator (its transports, state or Requests), on an application's stream.
  /// Counted: teardown waits (bounded) until every such callback has run, so that none runs on a freed communicator
  /// when the application destroys it before synchronizing its streams. `if_dropped`, if given, runs instead of `fn`
  /// when the stream accepted the callback and then dropped it unrun (a host stream whose earlier wait gave up), on
  /// the thread that let go of it last (the stream's, or the caller's when the stream dropped it before this
  /// returned), so that what `fn` was to report (a send's data is on its way) does not leave the peer waiting
  /// PICKLE_TIMEOUT for it. A callback the stream refused (this throws) is the caller's to handle. Not once the
  /// teardown has closed the control channels.
  void on_application_stream(device::Stream& stream, std::function<void()> fn, std::function<void()> if_dropped = {});
  /// Queues on `stream` a callback that does nothing when it runs, and runs `if_dropped` when the stream accepted it
  /// and then dropped it unrun (a host stream whose earlier wait gave up), so that work queued before it that reports
  /// nothing of itself (an ipc send's copy and completion write) is heard of. Not counted, unlike
  /// on_application_stream: teardown does not wait for it (it uses nothing of the communicator while it waits), and
  /// once teardown closed the hooks (drop_hooks) `if_dropped` no longer runs, even after the communicator is gone.
  /// Throws what the stream's host_callback throws (a stream that refuses work).
  void hear_if_dropped(device::Stream& stream, std::function<void()> if_dropped);
  /// Waits until the callbacks of on_application_stream have all run, or `deadline`; false on the deadline.
  bool drain_application_callbacks(const Deadline& deadline) const;
  /// Teardown's first step: waits until the late-matched sends are queued and the callbacks of on_application_stream
  /// have run. Should either still be pending at `deadline`, the application's streams are held behind a wait that
  /// nothing may satisfy now: the pairs that the waits in `waits` still wait on fail (net through fail_peer, its
  /// writes dropped first; shm stopped without releasing its rings, since the peer may be alive), which lets the
  /// streams go on, and both are drained again, for PICKLE_TIMEOUT.
  void settle_application_streams_at_close(const StreamWaitsAtClose& waits, const Deadline& deadline);
  /// Runs `check`, which uses this communicator (its Requests), on the host once `stream` has passed this point
  /// (device::Stream::check_when_passed: from the stream's next query or synchronize), so that a failure found then
  /// is reported by the stream; `what` names the operation. No host round trip on the stream, unlike
  /// on_application_stream. Teardown settles the checks that have not run (settle_stream_checks). Returns the check
  /// (its point can order a later call on another stream: device::PassedCheck::order_after).
  std::shared_ptr<device::PassedCheck> check_when_passed(device::Stream& stream, std::string what,
                                                         std::function<void()> check);
  /// Runs every check of check_when_passed that has not run, once its stream passed its point (until `deadline`;
  /// one that never does becomes an error of its stream), so that none runs on a freed communicator.
  void settle_stream_checks(const Deadline& deadline);

  /// Polls `done` (which may throw) with a spin-yield-sleep backoff until it returns true, or false once `deadline`
  /// passed: every host-side wait of the communicator goes through here.
  template <class Done>
  static bool poll_until(const Deadline& deadline, Done&& done) {
    device::host::Backoff backoff;
    while (!done()) {
      if (deadline.expired()) return false;
      backoff.pause();
    }
    return true;
  }

  /// Every rank's value of one fact, through the store under `key` (collective): rows[r] is rank r's.
  std::vector<std::string> gather_rows(const std::string& key, const std::string& mine) const;
  /// Picks the transport of every pair (transport/select.hpp) and checks that both ranks of each pair agree.
  void choose_transports();
  /// InvalidArgument naming both values when a setting that every rank must share (PICKLE_COLL_CHUNK) differs
  /// between this rank and a peer (collective: every rank calls it at creation).
  void check_settings_agree() const;
  /// InvalidArgument unless `peer` is another rank of this communicator.
  void check_peer(int peer, const OpContext& ctx) const;
  /// PeerError when `peer` failed or left (takes the state mutex).
  void check_peer_alive(int peer, const OpContext& ctx) const;
  /// The same, with `mutex` already held.
  void check_peer_alive_locked(int peer, const OpContext& ctx) const;

  /// Communicator::split: the group of this rank's color as a new communicator's state (null for kNoColor).
  Impl* split(int color, int key);
  /// Meets every rank of this communicator at `name` (a name used once): the store's barrier, or for a split
  /// communicator, every rank sets a key and waits for the others' (bounded by the timeout).
  void store_barrier(const std::string& name);
  /// The constructor's second half: the shm and net transports, the progress thread and the ready barrier. The
  /// constructor stops all of them when this throws.
  void start_transports_and_progress(const Deadline& deadline);

  // The state mutex (`mutex` below) lives on the heap, shared with the checks that on_stream leaves on the
  // application's streams (report_on_stream), which may run after this communicator is gone. Declared first, so that
  // it is destroyed last: members declared before `mutex` (the transports, the staging stream) may still run work
  // that takes it while they are destroyed.
  std::shared_ptr<std::mutex> shared_mutex = std::make_shared<std::mutex>();

  RankInfo info;
  MemoryKind kind;
  int device;
  double timeout_seconds;
  std::shared_ptr<Store> store;  // shared by the communicators of this job in this process
  std::string key_prefix;        // "comm/<n>/" (split: the parent's prefix + "split/<n>/<color>/")
  bool split_child = false;      // made by split(): ranks and world size are the group's, not the job's
  int splits = 0;                // split() calls so far (collective: the same count on every rank)
  std::vector<bool> same_host;  // per peer: shares memory and Unix sockets with this rank (comm/host_identity.hpp)
  std::vector<bool> same_gpu;   // per peer: CUDA memory on the very GPU of this rank (the same PCI bus id)
  std::vector<std::string> hosts;  // per rank: its host identity (comm/host_identity.hpp)
  /// The collectives across hosts go in two levels, through two communicators split from this one: `host`, this
  /// rank with the other ranks of its host (copy engines), and `across`, this rank with the ranks of the same local
  /// index on the other hosts (the network). Made on first use by host_groups(); destroyed first at teardown.
  struct HostGroups {
    Communicator host;
    Communicator across;
    std::vector<int> host_ranks, across_ranks;  // each group's ranks, as ranks of this communicator, in group order
    /// The steps as errors name them: "among the ranks of this host (2, 3)", "across hosts (ranks 1, 3)".
    std::string host_step, across_step;
    std::vector<int> index_of;                  // per rank of this communicator: its index on its host
    /// Per host (in the order of their first ranks), its ranks in rank order: ranks_of[h][i] has index i on host h.
    std::vector<std::vector<int>> ranks_of;
  };
  std::unique_ptr<HostGroups> host_groups_;
  bool host_groups_absent = false;                 // they do not apply (see host_groups)
  std::optional<std::string> host_groups_failure;  // making them failed: every later call fails alike
  /// The two-level groups, made on first use (collective: every rank calls it at the same collective), or null when
  /// they do not apply: every rank on one host, one rank per host, hosts with different numbers of ranks, or
  /// PICKLE_COLL_HIERARCHY=0.
  HostGroups* host_groups();
  std::vector<std::optional<device::FdChannel>> channels;
  std::vector<std::unique_ptr<std::recursive_mutex>> channel_send_mutex;  // per peer; held across announce + post
  // Per peer: a signal's count is taken and its write queued on the stream as one step, so that two threads
  // signalling one slot on one stream queue their counts in order. Not the channel's lock: queuing on a full stream
  // waits for the stream, whose host callbacks (a net or shm signal's message) send on the channel.
  std::vector<std::unique_ptr<std::mutex>> signal_order_mutex;
  std::unique_ptr<comm::SignalArea> signals;
  std::vector<transport::Choice> transports;  // per peer (this rank's own entry unused)
  std::unique_ptr<transport::ipc::IpcTransport> ipc;
  std::unique_ptr<transport::shm::ShmTransport> shm;  // null when no pair uses it
  bool shm_streams_left_running = false;  // teardown: ShmTransport::close left CUDA streams running (keep the words)
  // net with staging (GPU memory, or PICKLE_NET_STAGING=1): pinned buffers, the stream that copies landed data into
  // place, and the buffers of failed receives, never reused (a slow peer's writes may still land in them). Declared
  // before `net`, which is destroyed first.
  bool stage_net = false;
  std::unique_ptr<comm::StagingPool> staging;
  std::unique_ptr<device::Stream> staging_stream;
  // Queues every operation on staging_stream that a staged receive needs (copy_staged_piece, the deferred failure),
  // in order, from a thread that holds no lock: enqueuing on a full stream blocks until its host callbacks ran, and
  // those take `mutex`, which the transport's threads and fail_peer hold. Also the staged window puts' copies.
  // Drained and stopped by the teardown before the stream's last synchronize.
  std::unique_ptr<SerialWorker> staging_enqueuer;
  std::vector<std::shared_ptr<std::byte>> quarantined;  // guarded by `mutex`
  // The teardown synchronized the staging stream for the last time (guarded by `mutex`): nothing may be queued on it.
  bool staging_drained = false;
#ifdef PICKLE_HAVE_LIBFABRIC
  std::unique_ptr<transport::net::NetTransport> net;  // null when no pair uses it
#endif

  std::mutex shm_put_mutex;  // one shm put at a time takes its "source read" word (shm_path.cpp)
  /// The family whose calls this communicator's collectives count in, and whose losses they share: its own, or,
  /// for the host groups of a two-level communicator, their parent's (join_collective_family).
  std::shared_ptr<CollectiveFamily> collective_family = std::make_shared<CollectiveFamily>();
  std::vector<int> family_ranks;  // join_collective_family's `ranks`
  std::string family_step;        // and its `step`
  std::mutex& mutex = *shared_mutex;  // everything below (shared_mutex, above, holds it)
  struct PeerState {
    bool failed = false;
    bool said_goodbye = false;
    std::string failure;
    std::map<int, std::uint64_t> send_seq, recv_seq;                          // per tag
    std::map<int, std::deque<std::shared_ptr<RequestState>>> pending_sends;   // per tag, not yet matched
    std::map<int, std::deque<RecvPostMessage>> pending_posts;                 // per tag, not yet matched
    std::map<std::pair<int, std::uint64_t>, std::shared_ptr<RequestState>> posted_recvs;  // (tag, seq)
    std::map<std::uint64_t, const void*> announced;  // allocations announced to this peer: id -> base address
    std::vector<std::uint32_t> slot_generation = std::vector<std::uint32_t>(kCompletionSlots, 0);
    std::vector<std::shared_ptr<RequestState>> slot_owner = std::vector<std::shared_ptr<RequestState>>(kCompletionSlots);
    std::vector<int> free_slots;
    std::vector<std::uint32_t> signals_sent = std::vector<std::uint32_t>(kPeerSignalSlots, 0);
    // The highest count of each of the peer's signal slots that a stream was made to wait for (wait_signal_on_stream):
    // teardown tells from it whether a stream may still be waiting on the slot.
    std::vector<std::uint32_t> signals_awaited = std::vector<std::uint32_t>(kPeerSignalSlots, 0);
    /// Per watched slot (kWatchedSlots): whether a stream waits for a count the word has not reached, the value the
    /// word had when last seen to move, and since when (watch_stalled_waits).
    struct WatchedWait {
      bool pending = false;
      std::uint32_t seen = 0;
      std::chrono::steady_clock::time_point since{};
    };
    std::vector<WatchedWait> watched = std::vector<WatchedWait>(kWatchedSlots.size());
    // net transport: puts this rank wrote to the peer, puts of the peer that landed here, and the peer's signals
    // waiting for its earlier puts to land.
    std::uint64_t net_puts_sent = 0;
    comm::LandedPrefix net_puts_landed;
    std::deque<NetSignalMessage> net_signals_waiting;
    std::map<std::uint32_t, std::uint64_t> net_puts_announced;  // the peer's puts not landed yet: sequence -> bytes
    /// What the checks after waits on the peer's signals read (check_wait): shared with them, since they may run after
    /// this communicator is gone.
    const std::shared_ptr<PairFailure> failure_record = std::make_shared<PairFailure>();
    /// shm: what had not completed before the pair was first released (fail_peer).
    std::optional<UnfinishedWithPeer> unfinished_at_release;
    // shm transport: puts this rank issued to the peer (put n takes "source read" word n % kShmPutSlots), and each
    // word's generation as of its latest queued put (what a failure of the peer releases it to).
    std::uint64_t shm_puts = 0;
    std::vector<std::uint32_t> shm_put_generation = std::vector<std::uint32_t>(comm::kShmPutSlots, 0);
    // net and shm sends under way (they complete on this rank's "sent" words), by the receiver's slot: a failure of
    // the peer completes them with an error and releases their words. Owned here, not weakly: a
    // collective drops its Requests but leaves its stream waiting on their words. An entry goes when its slot is
    // reused or the peer fails.
    std::map<int, std::shared_ptr<RequestState>> sends_in_flight;
  };
  std::vector<PeerState> peers;
  /// "put #3 of 1024 bytes": the first of the peer's announced net puts that has not landed here, or "" (mutex held).
  static std::string first_missing_net_put(const PeerState& state);
  std::vector<std::shared_ptr<WindowState>> windows;
  int user_barriers = 0;
  int next_window_id = 0;
  int next_completion_slot(int peer, std::unique_lock<std::mutex>& lock, const OpContext& ctx);
  /// Whether a receive from `peer` holding a completion slot is settled: it failed, or its completion word shows the
  /// data delivered (mutex held).
  bool receive_settled(int peer, const RequestState& recv) const {
    return recv.error || device::host::flag_reached(signals->load(peer, comm::kPeerSignalSlots + recv.slot),
                                                    recv.generation);
  }

  std::unique_ptr<SerialWorker> outbox;  // control messages of the progress thread
  // The stream operations of a send that the progress thread matched (its receive was posted after it). That thread
  // must not wait to queue them: were it held by a full stream, it would stop reading the control channels (a peer
  // writing to it then waits too, two ranks suffice), and a stream of the application that waits for a net or shm
  // signal, which that thread delivers, would never run again. So it queues them itself only where that cannot
  // wait: an ipc send (three operations) onto the pair's one copy stream while that is idle, with none of the pair's
  // late matches still to be queued before it (a ping-pong's case, the lowest latency). Anything else goes to a
  // worker of the pair, behind the pair's earlier ones: one per peer, made at the pair's first such match, so that a
  // pair whose late matches are held up (they wait behind a stream that waits for a signal) does not hold up the
  // others', which that signal may need (tests/comm/full_stream_children.cpp). Should no thread be had for a worker,
  // the progress thread queues them itself after all, and may then wait.
  void queue_late_match(int peer, MatchedSend matched, device::Stream& stream);
  std::mutex match_enqueuers_mutex;  // guards the vector's slots: the progress thread fills them, teardown reads
  std::vector<std::unique_ptr<SerialWorker>> match_enqueuers;  // index: peer
  std::set<int> match_enqueuer_failed;  // peers whose worker could not be made (logged once each)
  /// The worker that queues `peer`'s late-matched sends (progress thread only; made on first use); null when no
  /// thread could be made (logged).
  SerialWorker* match_enqueuer(int peer);
  /// Waits until every late-matched send handed to the workers so far is queued on its stream; false at `deadline`.
  bool drain_match_enqueuers(const Deadline& deadline);
  std::thread progress;
  UniqueFd wake;  // eventfd: stops the progress thread, and wakes it when someone starts waiting on it
  std::atomic<bool> stopping{false};
  /// Demand for the progress thread's attention (progress.cpp, "Polling on demand"): host threads inside
  /// wait_for_progress, and sends queued until their receive's post arrives. While there is any, the thread polls
  /// its channels without sleeping; otherwise it sleeps in poll() and a message wakes it.
  std::atomic<int> progress_waiters{0};
  std::atomic<int> unmatched_sends{0};
  std::atomic<bool> progress_sleeping{false};
  /// CommStats::local_copy_bytes (Call::copy_local).
  std::atomic<std::uint64_t> local_copy_bytes{0};
  /// Signal slots whose stream waits the progress thread watches: the allreduce mailboxes', where a call enqueues its
  /// waits without any host wait, so that a peer that never raises them (alive but out of step: it skipped the call,
  /// or took another form of it) would hold the stream for ever. Other waits follow host waits that time out.
  static constexpr std::array<int, 2> kWatchedSlots{comm::kMailboxFilledSlot, comm::kMailboxEmptiedSlot};
  /// Set while a watched wait may be pending: the progress thread then wakes at least every 100 ms to look at them.
  std::atomic<bool> watching{false};
  std::chrono::steady_clock::time_point last_watch{};  // progress thread only
  /// Fails the pair (fail_peer, as a timeout) of every peer whose watched signal, awaited by a stream, has not moved
  /// for PICKLE_TIMEOUT less a margin (so that the stream's own synchronize deadline, which cannot name the peer,
  /// comes after): the failure releases the waits, and the collective's end check reports it naming the peer.
  void watch_stalled_waits();
  /// Wakes the progress thread if it sleeps, so that it polls without sleeping from now on (demand just rose).
  void wake_progress_if_sleeping();
  /// poll_until for a wait whose end the progress thread brings (a peer's post, a mapping, a match): the thread polls
  /// without sleeping meanwhile, so that the message is taken off its channel as soon as it arrives.
  template <class Done>
  bool wait_for_progress(const Deadline& deadline, Done&& done) {
    progress_waiters.fetch_add(1);
    wake_progress_if_sleeping();
    struct Leave {
      std::atomic<int>& waiters;
      ~Leave() { waiters.fetch_sub(1); }
    } leave{progress_waiters};
    return poll_until(deadline, std::forward<Done>(done));
  }
  std::atomic<int> application_callbacks{0};  // enqueued by on_application_stream, not yet run
  std::atomic<bool> application_hooks_closed{false};  // teardown closed the channels: if_dropped hooks do nothing
  /// hear_if_dropped's hooks may outlive the communicator (an application's stream that holds one): they read this,
  /// under its mutex, and teardown closes it under the same mutex, so that none runs during or after the close.
  struct DropHooks {
    std::mutex mutex;
    bool closed = false;
  };
  std::shared_ptr<DropHooks> drop_hooks = std::make_shared<DropHooks>();
  /// The checks of check_when_passed, with the operation each belongs to (mutex). A stream drops a check once it ran
  /// it, so the expired entries are the checks that ran.
  struct StreamCheck {
    std::weak_ptr<device::PassedCheck> check;
    std::string what;
  };
  std::vector<StreamCheck> stream_checks;
  /// The streams of note_stream_on_words_locked, by Stream::serial (mutex).
  std::map<std::uint64_t, std::weak_ptr<device::Stream>> streams_on_words;
  bool unwinding = false;  // destroyed while an exception unwinds (Communicator::close says so)

  /// The collectives layer's per-communicator state (src/collectives: scratch, side streams), made on first use
  /// under `mutex`. Declared last so that it goes first, while the transports its queued copies use still exist.
  std::shared_ptr<void> collectives;
};

}  // namespace pickle
