// Two-sided, tagged send/recv. The receiver announces each posted buffer (allocation id, offset, completion slot)
// on the control channel; the sender's i-th send on (peer, tag) meets the peer's i-th post on that tag, and the copy
// engine writes the data straight into the receiver's memory, followed by a stream write-value of the completion
// word. Whoever sees the second half of a pair (the send() call or the progress thread) starts the copy.
#include <algorithm>
#include <vector>

#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "core/error_text.hpp"
#include "core/log.hpp"
#include "device/backends.hpp"
#include "device/host/backoff.hpp"

namespace pickle {

using device::host::flag_reached;

void Communicator::Impl::check_peer_alive(int peer, const OpContext& ctx) const {
  std::lock_guard lock(mutex);
  check_peer_alive_locked(peer, ctx);
}

void Communicator::Impl::check_peer_alive_locked(int peer, const OpContext& ctx) const {
  const PeerState& state = peers[static_cast<std::size_t>(peer)];
  if (state.failed) throw PeerError(cat(describe(ctx), ": ", state.failure), peer);
}

std::pair<std::uint64_t, std::uint64_t> Communicator::Impl::announce(int peer, const void* ptr, std::size_t bytes,
                                                                     const OpContext& ctx) {
  if (bytes == 0) return {0, 0};
  if (ptr == nullptr) throw InvalidArgument(cat(describe(ctx), ": buffer pointer is null"));
  device::AllocationInfo found;
  try {
    found = device::find_allocation(ptr);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(cat(describe(ctx), ": the buffer is not memory pickle can share (", e.what(),
                              "); use Communicator::alloc, cudaMalloc or pickle-allocated host memory"));
  }
  if (found.kind != kind) {
    throw InvalidArgument(cat(describe(ctx), ": the buffer is ", memory_kind_name(found.kind),
                              " memory but this communicator moves ", memory_kind_name(kind), " memory"));
  }
  if (found.offset > found.bytes || bytes > found.bytes - found.offset) {  // no overflow for any size
    throw InvalidArgument(cat(describe(ctx), ": the buffer's allocation has only ", found.bytes - found.offset,
                              " bytes from the pointer on"));
  }
  // The shm transport never maps the peer's memory: the receiver copies out of the staging ring itself.
  if (uses_shm(peer) || uses_net(peer)) return {found.id, found.offset};
  std::lock_guard send_lock(*channel_send_mutex[peer]);
  {
    std::lock_guard lock(mutex);
    if (peers[peer].announced.count(found.id) != 0) return {found.id, found.offset};
  }
  release_freed_allocations(peer);
  device::ExportedMemory exported;
  try {
    exported = device::export_memory(ptr);
  } catch (const Error& e) {
    // Memory that find_allocation knows but cannot be shared (a cudaMallocAsync pool, say): say for which call.
    const std::string message = cat(describe(ctx), ": the buffer cannot be shared with peer ", peer, " (", e.what(),
                                    "); use Communicator::alloc or cudaMalloc memory");
    if (e.code() == ErrorCode::InvalidArgument) throw InvalidArgument(message);
    throw Error(e.code(), message);
  }
  send_control(peer, ExportMessage{device::serialize(exported.descriptor)}, exported.fd.get());
  std::lock_guard lock(mutex);
  peers[peer].announced.emplace(found.id, found.base);
  return {found.id, found.offset};
}

void Communicator::Impl::release_freed_allocations(int peer) {
  // Which allocations are gone is asked of CUDA (or the host registry) without the state lock: a lookup costs a
  // driver call, and this runs once per new allocation, next to an export that costs milliseconds anyway.
  std::vector<std::pair<std::uint64_t, const void*>> candidates;
  {
    std::lock_guard lock(mutex);
    candidates.assign(peers[peer].announced.begin(), peers[peer].announced.end());
  }
  std::erase_if(candidates, [](const auto& entry) { return device::allocation_alive(entry.second, entry.first); });
  if (candidates.empty()) return;

  std::vector<std::uint64_t> released;
  {
    std::lock_guard lock(mutex);
    PeerState& state = peers[peer];
    for (const auto& [id, base] : candidates) {
      // A window keeps its allocation mapped for the communicator's life (the application must not free it first).
      const bool in_window = std::any_of(windows.begin(), windows.end(), [&](const auto& window) {
        return window->ranks[static_cast<std::size_t>(info.rank)].alloc_id == id;
      });
      // A receive into freed memory that has not completed is the application's error; its copy may still come, so
      // the peer keeps the mapping (and the memory it holds), and the copy lands there rather than faulting.
      const bool awaited = std::any_of(state.slot_owner.begin(), state.slot_owner.end(), [&](const auto& owner) {
        return owner && owner->alloc_id == id && !receive_settled(peer, *owner);
      });
      if (in_window || awaited) continue;
      state.announced.erase(id);
      released.push_back(id);
    }
  }
  // Every receive into a released allocation completed, so its copy is done: the peer can unmap at once. The channel
  // send lock (held by the caller) puts these ahead of the next announcement, and after every post naming them.
  for (std::uint64_t id : released) send_control(peer, ReleaseMessage{id});
}

int Communicator::Impl::next_completion_slot(int peer, std::unique_lock<std::mutex>& lock, const OpContext& ctx) {
  PeerState& state = peers[peer];
  Deadline deadline = Deadline::after_seconds(timeout_seconds);
  device::host::Backoff backoff;
  while (state.free_slots.empty()) {
    // Take back the slots of receives that completed (the user need not wait on every Request).
    for (int slot = 0; slot < comm::kCompletionSlots; ++slot) {
      auto& owner = state.slot_owner[slot];
      if (owner && receive_settled(peer, *owner)) {
        state.posted_recvs.erase({owner->tag, owner->seq});
        owner.reset();
        state.free_slots.push_back(slot);
      }
    }
    if (!state.free_slots.empty()) break;
    if (deadline.expired()) {
      throw TimeoutError(cat(describe(ctx), ": ", comm::kCompletionSlots, " receives from peer ", peer,
                             " are still outstanding after ", timeout_seconds, " s"));
    }
    lock.unlock();
    backoff.pause();
    lock.lock();
  }
  int slot = state.free_slots.back();
  state.free_slots.pop_back();
  return slot;
}

Request Communicator::Impl::recv(int peer, int tag, void* ptr, std::size_t bytes, std::uint64_t collective_call) {
  OpContext ctx{.rank = info.rank, .peer = peer, .op = "recv", .bytes = bytes};
  check_peer(peer, ctx);
  check_peer_alive(peer, ctx);
  auto [alloc_id, offset] = announce(peer, ptr, bytes, ctx);

  auto request = std::make_shared<RequestState>();
  request->kind = RequestState::Kind::Recv;
  request->comm = this;
  request->ctx = ctx;
  request->tag = tag;
  request->collective_call = collective_call;
  request->dst = ptr;
  request->alloc_id = alloc_id;
  // Over net, what can fail for want of resources (a pinned staging buffer, a memory registration) comes before the
  // receive takes its slot and sequence number: it then fails alone, and the pair stays in step. (Failing later
  // would leave a sequence number the peer never hears of, and so fail the peer.)
  std::pair<std::uint64_t, std::uint64_t> net_region{0, 0};
  if (uses_net(peer) && bytes != 0) {
    try {
      net_region = prepare_net_recv(*request);
    } catch (const Error& e) {
      rethrow_with_prefix(e, cat(describe(ctx), ": the net transport cannot take the receive"));
    }
  }
  // A completion slot first: waiting for one (when thousands of receives are outstanding) must not hold the
  // channel's send lock, which the progress thread may need to answer this peer.
  int slot;
  {
    std::unique_lock lock(mutex);
    check_peer_alive_locked(peer, ctx);
    slot = next_completion_slot(peer, lock, ctx);
  }
  RecvPostMessage post;
  // The channel's send lock keeps posts in sequence order on the wire.
  std::lock_guard send_lock(*channel_send_mutex[peer]);
  {
    std::lock_guard lock(mutex);
    PeerState& state = peers[peer];
    if (state.failed) {
      state.free_slots.push_back(slot);
      throw PeerError(cat(describe(ctx), ": ", state.failure), peer);
    }
    request->slot = slot;
    request->generation = ++state.slot_generation[request->slot];
    request->seq = state.recv_seq[tag]++;
    state.slot_owner[request->slot] = request;
    state.posted_recvs[{tag, request->seq}] = request;
    post = RecvPostMessage{.tag = tag, .seq = request->seq, .alloc_id = alloc_id, .offset = offset, .bytes = bytes,
                           .slot = static_cast<std::uint32_t>(request->slot), .generation = request->generation,
                           .net_addr = net_region.first, .net_key = net_region.second};
  }
  try {
    // (Expecting fails only when the transport saw the peer fail. A zero-byte recv over net completes on the
    // sender's NetEmptySendMessage.)
    if (uses_net(peer) && bytes != 0) expect_net_recv(peer, *request);
    send_control(peer, post);
  } catch (const Error& e) {
    // The post is half-committed (slot, sequence number): the pair can no longer stay in step.
    fail_peer(peer, cat("the control channel to peer ", peer, " failed: ", e.what()));
    throw;
  }
  return Request(request);
}

Request Communicator::Impl::send(int peer, int tag, const void* ptr, std::size_t bytes, Stream* after,
                                 std::uint64_t collective_call) {
  OpContext ctx{.rank = info.rank, .peer = peer, .op = "send", .bytes = bytes};
  check_peer(peer, ctx);
  if (bytes != 0 && ptr == nullptr) throw InvalidArgument(cat(describe(ctx), ": buffer pointer is null"));
  if (after != nullptr && (after->kind() != kind || (kind == MemoryKind::Cuda && after->device() != device))) {
    throw InvalidArgument(cat(describe(ctx), ": the stream to order after is a ", memory_kind_name(after->kind()),
                              " stream of device ", after->device(), "; this communicator uses ",
                              memory_kind_name(kind), " device ", device));
  }
  auto request = std::make_shared<RequestState>();
  request->kind = RequestState::Kind::Send;
  request->comm = this;
  request->ctx = ctx;
  request->tag = tag;
  request->collective_call = collective_call;
  request->src = ptr;
  MatchedSend matched;
  bool matched_now = true;
  // With one copy stream per peer, an ipc send matched now joins the caller's stream: ordered after the producer
  // with no cross-stream event, the fewest operations per message (the lowest latency). With several
  // (PICKLE_IPC_STREAMS > 1) every ipc send takes its turn on the copy streams instead, so that back-to-back
  // messages overlap one message's fenced completion write with the next one's copy.
  const bool join_caller = after != nullptr && (!uses_ipc(peer) || ipc->joins_caller_stream());
  // A copy that will not run on the caller's stream waits for the stream's point now: a send matched later (on
  // the peer's copy stream), and an ipc send that takes turns. An shm send instead learns that its source is
  // ready from a host callback on the caller's stream (below), and only then takes its place in the ring.
  // The event is recorded with no lock held: recording on a full stream waits until the stream ran some of its work,
  // whose host callbacks may take `mutex`, or which may wait for a signal that the progress thread delivers under
  // it. Whether a send matched now needs one is known under the lock (a post may be waiting): one that finds it
  // needs an event it lacks records it and looks again.
  std::shared_ptr<device::Event> event;
  const auto record_event = [&] {
    event = device::make_ordering_event(kind, std::max(0, device));
    try {
      after->impl().record(*event);
    } catch (const Error& e) {
      // Before the send took its sequence number: nothing of it exists, and the pair stays in step.
      rethrow_with_prefix(e, cat(describe(ctx), " (tag ", tag, "): recording its stream's point (nothing was sent)"));
    }
  };
  if (after != nullptr && !uses_shm(peer) && !join_caller) record_event();
  for (;;) {
    std::unique_lock lock(mutex);
    check_peer_alive_locked(peer, ctx);
    PeerState& state = peers[peer];
    auto& posts = state.pending_posts[tag];
    if (after != nullptr && !uses_shm(peer) && (posts.empty() || !join_caller)) {
      if (!event) {
        lock.unlock();
        record_event();
        continue;
      }
      request->after_event = event;
    }
    request->seq = state.send_seq[tag]++;
    if (uses_shm(peer) && after == nullptr) request->shm_state = RequestState::kShmSourceReady;
    if (!posts.empty()) {
      // The receiver is ready: the copy joins the caller's stream, or the peer's next copy stream.
      RecvPostMessage post = posts.front();
      posts.pop_front();
      matched = start_copy(peer, request, post, join_caller ? after->impl() : ipc->stream(peer));
    } else {
      state.pending_sends[tag].push_back(request);
      unmatched_sends.fetch_add(1);
      matched_now = false;
    }
    break;
  }
  if (!matched_now) wake_progress_if_sleeping();  // the post will be matched on the progress thread: keep it polling
  // A failure found at match time (size mismatch) surfaces through the Request, whichever side arrived first.
  finish_matched_send(peer, matched, /*from_progress_thread=*/false);
  if (uses_shm(peer) && after != nullptr) {
    try {
      on_application_stream(
          after->impl(),
          [this, peer, request] {
            if (auto message = shm_send_step(peer, request, RequestState::kShmSourceReady)) {
              post_control(peer, *message);
            }
          },
          [this, peer, request] {
            refuse_shm_send(peer, request, Error(ErrorCode::System, std::string(kDroppedByItsStream)),
                            /*post_message=*/true);
          });
    } catch (const Error& e) {
      refuse_shm_send(peer, request, e, /*post_message=*/false);
    } catch (const std::exception& e) {
      refuse_shm_send(peer, request, Error(ErrorCode::System, e.what()), /*post_message=*/false);
    }
  }
  return Request(request);
}

void Communicator::Impl::refuse_shm_send(int peer, const std::shared_ptr<RequestState>& request, const Error& cause,
                                         bool post_message) {
  // The caller's stream refused the callback that would say the source is ready (a broken stream), or dropped it
  // unrun (a wait before it gave up): nothing of the send reaches the ring. It fails alone, its Request throwing the
  // cause; the receiver hears that nothing will come (its receive fails with a PeerError) from whichever step comes
  // last, this one or the match.
  std::optional<ControlMessage> reply;
  {
    std::lock_guard lock(mutex);
    if (request->error) return;  // the pair failed first, and that failed the send and its receive
    try {
      rethrow_with_prefix(cause,
                          cat(describe(request->ctx), " (tag ", request->tag, "): queuing the send on its stream"));
    } catch (const Error&) {
      request->error = std::current_exception();
    }
    request->failed_alone = true;
    // Still waiting for its receive's post, which it will fail: nothing to poll for (the progress thread spins while
    // unmatched sends wait for their posts). The refusal below takes it out of the count (counts_as_unmatched).
    if (!request->enqueued) unmatched_sends.fetch_sub(1);
    reply = shm_send_step(peer, request, RequestState::kShmSourceReady | RequestState::kShmRefused);
  }
  if (!reply) return;
  if (post_message) {
    post_control(peer, std::move(*reply));
  } else {
    send_control(peer, *reply);
  }
}

std::optional<ControlMessage> Communicator::Impl::shm_send_step(int peer, const std::shared_ptr<RequestState>& send,
                                                                int step) {
  const int other = step == RequestState::kShmMatched ? RequestState::kShmSourceReady : RequestState::kShmMatched;
  const int before = send->shm_state.fetch_or(step);
  if ((before & other) == 0) return std::nullopt;  // the other step comes later
  // A source-ready callback that ran although queuing it was refused (a CUDA callback queued in part): the refusal
  // took that step already.
  if (step == RequestState::kShmSourceReady && (before & RequestState::kShmRefused) != 0) return std::nullopt;
  if (((before | step) & RequestState::kShmRefused) != 0) {
    // Its stream refused it (refuse_shm_send): the last step, with the mutex held either way (refuse_shm_send, or
    // start_copy for the match), tells the receiver, and releases streams that wait for the send.
    auto& in_flight = peers[peer].sends_in_flight;
    if (const auto found = in_flight.find(send->slot); found != in_flight.end() && found->second == send) {
      in_flight.erase(found);
    }
    signals->advance_sent(peer, comm::kPeerSignalSlots + send->slot, send->generation);
    try {
      std::rethrow_exception(send->error);
    } catch (const Error& e) {
      return send_failed_message(*send, e);
    }
  }
  // Both steps are done, and this thread did the last: the send takes its place in the ring now. (A pair that
  // failed meanwhile queues nothing, and tells the peer nothing: the send failed with the pair.)
  const std::optional<std::uint64_t> first = shm->send(peer, send->src, send->ctx.bytes);
  if (!first) return std::nullopt;
  return ShmSendMessage{.tag = send->tag, .seq = send->seq, .bytes = send->ctx.bytes, .first_chunk = *first};
}

Communicator::Impl::MatchedSend Communicator::Impl::start_copy(int peer, const std::shared_ptr<RequestState>& request,
                                                               const RecvPostMessage& post, device::Stream& stream) {
  RequestState& send = *request;
  const OpContext& ctx = send.ctx;
  try {
    if (post.seq != send.seq) {
      throw ProtocolError(cat(describe(ctx), ": tag ", send.tag, " send #", send.seq, " met post #", post.seq));
    }
    if (post.bytes != send.ctx.bytes) {
      throw InvalidArgument(cat(describe(ctx), " (tag ", send.tag, "): peer ", peer, " posted a recv of ", post.bytes,
                                " bytes; sizes of a send and its recv must match"));
    }
    if (uses_shm(peer)) {
      // Into the staging ring once the source is also ready (shm_send_step); the receiver copies it out and writes
      // its completion word and this send's "sent" word. Empty sends too: a marker chunk keeps them in ring order.
      send.slot = static_cast<int>(post.slot);
      send.generation = post.generation;
      send.enqueued = true;
      peers[peer].sends_in_flight[send.slot] = request;
      return {.send = request, .enqueue = nullptr, .reply = shm_send_step(peer, request, RequestState::kShmMatched)};
    }
    if (uses_net(peer)) return claim_net_send(peer, request, post, stream);
    void* dst = post.bytes != 0 ? ipc->remote_address(peer, post.alloc_id, post.offset, post.bytes, ctx) : nullptr;
    send.slot = static_cast<int>(post.slot);
    send.generation = post.generation;
    note_stream_on_words_locked(stream);
    send.copied_on = stream.serial();
    send.enqueued = true;
    return {.send = request,
            .enqueue = [this, request, dst, on = &stream] { return enqueue_ipc_copy(request, dst, *on); },
            .reply = std::nullopt};
  } catch (const Error& e) {
    if (!send.error) send.error = std::current_exception();  // a send its stream refused keeps that error
    send.failed_alone = true;
    return {.send = request, .enqueue = nullptr, .reply = send_failed_message(send, e)};
  }
}

std::optional<ControlMessage> Communicator::Impl::enqueue_ipc_copy(const std::shared_ptr<RequestState>& request,
                                                                   void* dst, device::Stream& stream) {
  RequestState& send = *request;
  // The send is claimed: whatever fails here, it fails, and the receiver must hear that nothing will come. Named as
  // a failure of this send, with the stream's own error (its code kept) after it.
  const auto fail = [&](const std::exception& e) {
    ipc->clear_copy_stream_error(send.ctx.peer, stream);
    const std::string prefix = cat(describe(send.ctx), " (tag ", send.tag, "): queuing the send on its stream");
    const auto* error = dynamic_cast<const Error*>(&e);
    try {
      rethrow_with_prefix(error != nullptr ? *error : Error(ErrorCode::System, e.what()), prefix);
    } catch (const Error& named) {
      std::lock_guard lock(mutex);
      if (!send.error) {
        send.error = std::current_exception();
        send.failed_alone = true;
      }
      return send_failed_message(send, named);
    }
  };
  try {
    ipc->clear_dropped_work(send.ctx.peer, stream);
    wait_for_callers_point(send, stream);
    ipc->copy(stream, dst, send.src, send.ctx.bytes);
    // The write-value's fence makes the copy visible before the word: the receiver may read the data once it sees it.
    // Right behind another send's, on CUDA, it goes to the stream's completion lane, so that the next copy need not
    // wait for it (completion_lanes.hpp).
    if (transport::ipc::CompletionLanes* lanes = ipc->completion_lanes()) {
      if (send.after_event) ipc->note_wait_on(stream);  // the copy waited for the caller's point, a wait like any
      auto written = lanes->write_after(stream, completion_word_for_streams(send), completion_word_for_host(send),
                                        send.generation);
      if (written.on_lane()) {
        std::lock_guard lock(mutex);
        send.lane_write = std::move(written);
      }
    } else {
      stream.write_value(completion_word_for_streams(send), send.generation);
    }
  } catch (const std::exception& e) {
    return fail(e);
  }
  // A host stream drops what it accepted when a wait queued ahead of it gives up (the caller's stream, or a copy
  // stream whose wait for the caller's point found that point dropped); nothing would then write the completion
  // word, and both sides would wait PICKLE_TIMEOUT. A callback behind the write hears of the drop. (A CUDA stream
  // runs what it accepted, or fails the whole context.)
  if (kind != MemoryKind::Host) return std::nullopt;
  try {
    hear_if_dropped(stream, [this, request, on = &stream] { fail_dropped_ipc_send(request, on); });
  } catch (const std::exception& e) {
    // Refused after the write was queued: a wait queued before it (another thread's) gave up since, and the stream
    // dropped its queue; the write went with it unless it had run. One that ran delivered the message.
    bool delivered = false;
    {
      std::lock_guard lock(mutex);
      delivered = flag_reached(completion_value(send), send.generation);
    }
    if (delivered) {
      ipc->clear_copy_stream_error(send.ctx.peer, stream);
      return std::nullopt;
    }
    return fail(e);
  }
  return std::nullopt;
}

void Communicator::Impl::fail_dropped_ipc_send(const std::shared_ptr<RequestState>& request,
                                               const device::Stream* dropped_by) {
  RequestState& send = *request;
  const int peer = send.ctx.peer;
  // Only an address: the stream may be an application's stream being destroyed (it drops its queue then).
  ipc->note_dropped_work(peer, dropped_by);
  std::optional<ControlMessage> reply;
  {
    std::lock_guard lock(mutex);
    if (send.error) return;  // failed already, and its receiver told (its enqueue failed, or the pair did)
    // Dropped behind its completion write (a wait another thread queued between them): the message arrived.
    if (flag_reached(completion_value(send), send.generation)) return;
    const Error cause(ErrorCode::System, cat(describe(send.ctx), " (tag ", send.tag,
                                             "): queuing the send on its stream: ", kDroppedByItsStream));
    send.error = std::make_exception_ptr(cause);
    send.failed_alone = true;
    reply = send_failed_message(send, cause);
  }
  post_control(peer, std::move(*reply));  // on the stream's thread: through the outbox, as a stream callback must
}

void Communicator::Impl::wait_for_callers_point(const RequestState& send, device::Stream& stream) {
  if (!send.after_event) return;
  // A point that will never be reached (its stream gave up or broke since the call) fails the send here (query
  // throws): a wait for it would make the pair's copy stream give up, and refuse every later send to this peer.
  send.after_event->query();
  stream.wait(*send.after_event);
}

SendFailedMessage Communicator::Impl::send_failed_message(const RequestState& send, const Error& cause) {
  std::string reason = without_head(cause.what());  // the receiver wraps it in an error of its own
  if (reason.size() > 1024) reason.resize(1024);
  // A send that does not fit its post (sizes, sequence, the receive's range) is both sides' business: Mismatch, and
  // the receive fails with InvalidArgument. Anything else is this rank's failure alone (its stream refused the copy
  // or its completion): the receive fails with a PeerError and the pair goes on, since nothing of the message lands.
  // A stream that refuses work runs none of what it accepted before either (a CUDA stream's error is sticky; a host
  // stream that gave a wait up dropped its queue), so a copy accepted before a refused completion never runs.
  using Failure = SendFailedMessage::Failure;
  const bool arguments = cause.code() == ErrorCode::InvalidArgument || cause.code() == ErrorCode::Protocol;
  const Failure failure = arguments ? Failure::Mismatch : Failure::NotWritten;
  return SendFailedMessage{
      .tag = send.tag, .seq = send.seq, .send_bytes = send.ctx.bytes, .reason = reason, .failure = failure};
}

void Communicator::Impl::finish_matched_send(int peer, MatchedSend& matched, bool from_progress_thread) {
  if (matched.enqueue && from_progress_thread) {
    // Queued later than the match, by the pair's worker or by the progress thread once it let go of the mutex: a net
    // send is among the pair's sends in flight from its claim on, so a failure of the pair since then failed it, and
    // the application, told so, may have freed its source. (An ipc send's failure shows only in its own error, and
    // send() queues before it returns.)
    std::lock_guard lock(mutex);
    if (matched.send->error) matched.enqueue = nullptr;
  }
  if (matched.enqueue) {
    if (auto failure = matched.enqueue()) matched.reply = std::move(failure);
  }
  if (!matched.reply) return;
  if (from_progress_thread) {
    post_control(peer, std::move(*matched.reply));
  } else {
    send_control(peer, *matched.reply);
  }
}

std::uint32_t Communicator::Impl::completion_value(const RequestState& request) const {
  return device::host::load_acquire(completion_word_for_host(request));
}

const std::uint32_t* Communicator::Impl::completion_word_for_host(const RequestState& request) const {
  const int peer = request.ctx.peer, index = comm::kPeerSignalSlots + request.slot;
  if (request.kind == RequestState::Kind::Recv) return signals->local_word(peer, index);
  if (uses_net(peer) || uses_shm(peer)) return signals->sent_word(peer, index);
  return signals->remote_word(peer, index);
}

std::uint32_t* Communicator::Impl::completion_word_for_streams(const RequestState& request) const {
  const int peer = request.ctx.peer, index = comm::kPeerSignalSlots + request.slot;
  if (request.kind == RequestState::Kind::Recv) return signals->local_word_for_streams(peer, index);
  if (uses_net(peer) || uses_shm(peer)) return signals->sent_word_for_streams(peer, index);
  return signals->remote_word_for_streams(peer, index);
}

bool Communicator::Impl::test(RequestState& request) {
  bool matched;
  {
    std::lock_guard lock(mutex);
    if (request.error) std::rethrow_exception(request.error);
    if (request.reported_complete) return true;
    matched = request.kind == RequestState::Kind::Recv || request.enqueued;
  }
  // The completion word first, then the peer's "gave up" word: a peer that gave the shm pair up sets it before its
  // rings let anything through, so a completion read before a clear word carries the message's own bytes.
  const bool reached = matched && flag_reached(completion_value(request), request.generation);
  if (uses_shm(request.ctx.peer) && peer_gave_up(request.ctx.peer)) return fail_because_peer_gave_up(request);
  if (!reached) return false;
  // Look at the error again: a failure (the peer's send did not match) sets it, then releases the word, and may
  // have done both since the first look.
  std::lock_guard lock(mutex);
  if (request.error) std::rethrow_exception(request.error);
  // shm: the release of a failed pair lets its queued copies run through, which moves the words of requests that did
  // not complete before it; fail_peer fails them once the release is done (the application must not free their
  // buffers earlier). Until then, their words say nothing.
  if (request.unfinished_at_release) return false;
  request.reported_complete = true;
  return true;
}

void Communicator::Impl::wait(RequestState& request) {
  if (poll_until(Deadline::after_seconds(timeout_seconds), [&] { return test(request); })) return;
  std::lock_guard lock(mutex);
  bool matched = request.kind == RequestState::Kind::Recv || request.enqueued;
  throw TimeoutError(cat(describe(request.ctx), " (tag ", request.tag, "): not complete after ", timeout_seconds,
                         " s; ", matched ? "the data has not arrived" : "the peer has not posted the matching recv"));
}

bool Communicator::Impl::on_stream(RequestState& request, device::Stream& stream) {
  // A send's slot is known only once it is matched: wait (bounded) for that first. A recv's is known at once.
  // A send whose copy went onto `stream` itself needs nothing more when its completion write went there too (the
  // stream orders them), and a join of the stream's completion lane when the write went there.
  bool ordered_already = false;
  transport::ipc::CompletionLanes::Written lane_write;
  bool known = poll_until(Deadline::after_seconds(timeout_seconds), [&] {
    std::lock_guard lock(mutex);
    if (request.error) std::rethrow_exception(request.error);
    if (request.kind == RequestState::Kind::Recv) return true;
    ordered_already = request.enqueued && request.copied_on == stream.serial();
    if (ordered_already) lane_write = request.lane_write;
    return request.enqueued;
  });
  if (!known) {
    throw TimeoutError(cat(describe(request.ctx), " (tag ", request.tag, "): on_stream: the peer has not posted the "
                           "matching recv within ", timeout_seconds, " s"));
  }
  if (ordered_already) {
    // Its write went to the stream's lane: the stream waits for the lane's event, not for the word (about 1.8 us
    // of stream time per wait on a word in host memory). A wait on the stream: the next send there writes its
    // completion on the stream itself (completion_lanes.hpp). Nothing enqueued, nothing changes for it.
    if (transport::ipc::CompletionLanes::join(stream, lane_write)) ipc->note_wait_on(stream);
    return false;
  }
  stream.wait_value(completion_word_for_streams(request), request.generation);
  ipc->note_wait_on(stream);  // as above
  std::lock_guard lock(mutex);
  note_stream_on_words_locked(stream);
  request.waiting_streams.push_back(stream.weak_from_this());
  return true;
}

void Communicator::Impl::report_on_stream(const std::shared_ptr<RequestState>& request, device::Stream& stream) {
  // The check holds what it reads, not this communicator: a stream may pass the wait after the communicator is gone
  // (its teardown releases what streams still wait for, and sets those requests' errors first). Both are made with
  // the communicator's state and never replaced.
  stream.check_when_passed([state_mutex = shared_mutex, request,
                            failure = peers[static_cast<std::size_t>(request->ctx.peer)].failure_record] {
    std::lock_guard lock(*state_mutex);
    throw_unless_completed_locked(*request, *failure);
  });
  // Only once the check is there (making it may fail): the teardown's release reports on the streams otherwise.
  std::lock_guard lock(mutex);
  request->reported_on_streams = true;
}

void Communicator::Impl::throw_unless_completed_locked(RequestState& request, PairFailure& record) {
  if (request.error) std::rethrow_exception(request.error);
  if (request.reported_complete) return;
  const int peer = request.ctx.peer;
  const std::string what = cat(describe(request.ctx), " (tag ", request.tag, ")");
  // As test(): the completion word (reached, since the stream passed its wait) is not taken from a pair the peer
  // gave up, nor from one whose release began before it (fail_peer_locked fails it; this may run first).
  {
    std::lock_guard record_lock(record.mutex);
    if (record.peer_gave_up()) throw PeerError(cat(what, ": ", gave_up_text(request.ctx.rank, peer)), peer);
    if (request.unfinished_at_release) {
      const std::string cause = record.failed ? record.reason : cat("the pair with peer ", peer, " failed");
      throw PeerError(cat(what, ": ", cause, "; the stream's wait on it was released without its data"), peer);
    }
  }
  request.reported_complete = true;
}

}  // namespace pickle
