// The progress thread: reads every control channel, maps announced memory, matches posted receives with waiting
// sends, and turns a peer's disappearance into PeerError on every operation pending with it (and releases stream
// waits on its completion words, so that no stream stays blocked on a peer that will never write).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "comm/net_pieces.hpp"
#include "core/log.hpp"
#include "core/overloaded.hpp"
#include "device/descriptor.hpp"
#include "device/host/backoff.hpp"

namespace pickle {
namespace {

/// How far ahead of what a failed peer's signal slot reached its release moves it (fail_peer_locked): half of the
/// cyclic comparison's range, so that waits up to 2^30 behind and up to 2^30 ahead of the slot both pass.
constexpr std::uint32_t kReleaseDistance = 1u << 30;

}  // namespace

void Communicator::Impl::send_control(int peer, const ControlMessage& message, int fd) {
  std::lock_guard lock(*channel_send_mutex[peer]);
  channels[peer]->send(comm::encode(message), fd, Deadline::after_seconds(timeout_seconds));
}

void Communicator::Impl::post_control(int peer, ControlMessage message) {
  outbox->post([this, peer, message = std::move(message)] {
    try {
      send_control(peer, message);
    } catch (const Error& e) {
      // The channel is broken: the progress thread sees it close and fails the peer.
      PICKLE_LOG(Debug, "comm", "rank " << info.rank << ": control message to peer " << peer << " lost: " << e.what());
    }
  });
}

void Communicator::Impl::wake_progress_if_sleeping() {
  if (!progress_sleeping.load()) return;
  std::uint64_t one = 1;
  if (::write(wake.get(), &one, sizeof one) < 0) PICKLE_LOG(Debug, "comm", "could not wake the progress thread");
}

SerialWorker* Communicator::Impl::match_enqueuer(int peer) {
  std::lock_guard lock(match_enqueuers_mutex);
  auto& worker = match_enqueuers[static_cast<std::size_t>(peer)];
  if (!worker) {
    try {
      worker = std::make_unique<SerialWorker>(cat("matched sends to peer ", peer));
    } catch (const std::exception& e) {  // no thread to be had: the caller queues the send itself (it may wait)
      if (!match_enqueuer_failed.insert(peer).second) return nullptr;  // said once per peer
      PICKLE_LOG(Error, "comm", "rank " << info.rank << ": no thread to queue the late-matched sends to peer " << peer
                                        << " (" << e.what() << "); the progress thread queues them itself, and may "
                                        << "wait for a full stream");
    }
  }
  return worker.get();
}

void Communicator::Impl::queue_late_match(int peer, MatchedSend matched, device::Stream& stream) {
  SerialWorker* worker = nullptr;
  {
    std::lock_guard lock(match_enqueuers_mutex);
    worker = match_enqueuers[static_cast<std::size_t>(peer)].get();
  }
  // With one copy stream per peer, nothing else queues work that waits on it (a send matched at call time joins the
  // caller's stream, or has no stream to wait for): idle now, it takes the three operations at once. With several,
  // sends matched at call time take turns on them too, each behind an event of its caller's stream, and another
  // thread could fill the idle stream before this one queues: always the worker then.
  const bool cannot_wait = uses_ipc(peer) && ipc->joins_caller_stream() && (worker == nullptr || worker->idle()) &&
                           stream.idle_now();
  if (!cannot_wait) worker = match_enqueuer(peer);
  if (cannot_wait || worker == nullptr) {
    finish_matched_send(peer, matched, /*from_progress_thread=*/true);
    return;
  }
  worker->post([this, peer, matched = std::move(matched)]() mutable {
    finish_matched_send(peer, matched, /*from_progress_thread=*/true);
  });
}

bool Communicator::Impl::drain_match_enqueuers(const Deadline& deadline) {
  // Drained without the lock: the progress thread may make a worker meanwhile (one made later has nothing of what
  // came before), and none goes away before the communicator's teardown has stopped that thread.
  std::vector<SerialWorker*> workers;
  {
    std::lock_guard lock(match_enqueuers_mutex);
    for (auto& worker : match_enqueuers) {
      if (worker) workers.push_back(worker.get());
    }
  }
  bool drained = true;
  for (SerialWorker* worker : workers) drained = worker->drain(deadline) && drained;
  return drained;
}

void Communicator::Impl::progress_loop() {
  std::vector<int> live;  // peers whose channel we still read
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (peer != info.rank) live.push_back(peer);
  }
  std::vector<pollfd> fds;
  // Polling on demand. A thread woken from poll() takes several microseconds to run, and some host waits are for a
  // message that this thread must take off its channel first (a collective's send waits for the peer's post; a send
  // issued before its receive was heard of waits for the post to be matched here). While such a wait is under way
  // (progress_waiters, unmatched_sends), and for a short while after (back-to-back calls keep it awake), the thread
  // polls without sleeping; otherwise it sleeps in poll() until a message or the eventfd wakes it. Until 2026-11-25 it
  // polled for 200 us after every message, so steady traffic (posts arriving every few microseconds while nobody
  // waited for them) kept one core per rank busy.
  constexpr auto kAwakeAfterDemand = std::chrono::microseconds(100);
  auto awake_until = std::chrono::steady_clock::now();
  auto wanted = [this] { return progress_waiters.load() > 0 || unmatched_sends.load() > 0; };
  while (!stopping.load()) {
    fds.clear();
    fds.push_back({wake.get(), POLLIN, 0});
    for (int peer : live) fds.push_back({channels[peer]->native_handle(), POLLIN, 0});
    int timeout_ms = 0;
    if (wanted()) {
      awake_until = std::chrono::steady_clock::now() + kAwakeAfterDemand;
    } else if (std::chrono::steady_clock::now() >= awake_until) {
      // Announce the sleep, then look at the demand again: a waiter that raised it before this store sees no
      // sleeper and writes nothing, so the second look must catch it (both are sequentially consistent).
      progress_sleeping.store(true);
      timeout_ms = wanted() ? 0 : watching.load() ? 100 : 1000;
    }
    int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    progress_sleeping.store(false);
    if (ready < 0) {
      if (errno == EINTR) continue;
      PICKLE_LOG(Error, "comm", "progress thread: poll failed: " << std::strerror(errno));
      return;
    }
    // The watch: every 50 ms while a mailbox wait may be pending; otherwise about once a second, for a peer's
    // out-of-step word (a rank whose stream waits on this peer for something else, or nothing, hears of it too).
    const auto watch_every = watching.load() ? std::chrono::milliseconds(50) : std::chrono::milliseconds(1000);
    if (std::chrono::steady_clock::now() - last_watch >= watch_every) {
      last_watch = std::chrono::steady_clock::now();
      watch_stalled_waits();
    }
    if (fds[0].revents != 0) {
      std::uint64_t count;
      [[maybe_unused]] const ssize_t drained = ::read(wake.get(), &count, sizeof count);  // non-blocking eventfd
    }
    if (ready == 0) {
      if (timeout_ms == 0) std::this_thread::yield();
      continue;
    }
    std::vector<int> closed;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int peer = live[i - 1];
      try {
        auto message = channels[peer]->recv(Deadline::after_seconds(timeout_seconds));
        handle(peer, comm::decode(message.bytes), std::move(message.fd));
      } catch (const Error& e) {
        bool expected;
        {
          std::lock_guard lock(mutex);
          expected = peers[peer].said_goodbye || stopping.load();
        }
        if (!expected) {
          // A peer that found the collectives out of step (or gave up a mailbox call) may exit before this thread's
          // watch reads its word: the reason is what the peer said, not only that it went.
          const bool near = same_host[static_cast<std::size_t>(peer)];
          const std::uint32_t word = near ? signals->load(peer, comm::kOutOfStepWord) : 0;
          fail_peer(peer, word != 0
                              ? cat(comm::out_of_step_reason(peer, word), "; then it closed its channel: ", e.what())
                              : cat("peer ", peer, " failed: ", e.what()));
        }
        closed.push_back(peer);
      }
    }
    std::erase_if(live, [&](int peer) { return std::find(closed.begin(), closed.end(), peer) != closed.end(); });
  }
}

void Communicator::Impl::handle(int peer, ControlMessage message, UniqueFd fd) {
  std::visit(
      Overloaded{
          [&](const ExportMessage& m) { ipc->cache().insert(peer, device::parse_descriptor(m.descriptor), std::move(fd)); },
          [&](const RecvPostMessage& post) {
            MatchedSend matched;
            device::Stream* copy_stream = nullptr;  // where a late match's copy goes
            {
              std::lock_guard lock(mutex);
              PeerState& state = peers[peer];
              auto& sends = state.pending_sends[post.tag];
              if (sends.empty()) {
                state.pending_posts[post.tag].push_back(post);
              } else {
                auto send = sends.front();
                sends.pop_front();
                if (send->counts_as_unmatched()) unmatched_sends.fetch_sub(1);
                copy_stream = &ipc->stream(peer);
                matched = start_copy(peer, send, post, *copy_stream);
              }
            }
            if (matched.enqueue) {
              queue_late_match(peer, std::move(matched), *copy_stream);
            } else {
              finish_matched_send(peer, matched, /*from_progress_thread=*/true);
            }
          },
          [&](const SendFailedMessage& m) {
            using Failure = SendFailedMessage::Failure;
            const bool net_only = m.failure == Failure::PartlyWritten || m.failure == Failure::CollectiveNotWritten;
            if (net_only && !uses_net(peer)) {
              throw ProtocolError(
                  cat("rank ", info.rank, ": peer ", peer, " failed a net write but uses another transport"));
            }
            if (m.failure == Failure::PartlyWritten) {
              // Chunks of the send may still land, in the receive's buffer and under its message id: only closing
              // the pair's endpoints (fail_peer) stops them, as for a put that failed after its announcement.
              fail_peer(peer, cat("peer ", peer, "'s send of ", m.send_bytes, " bytes (tag ", m.tag,
                                  ") failed partway: ", m.reason));
              return;
            }
            if (m.failure == Failure::CollectiveNotWritten) {
              // A collective cannot complete without it, anywhere: the pair fails on this side too.
              fail_peer(peer, cat("peer ", peer, "'s send of ", m.send_bytes, " bytes in a collective (tag ", m.tag,
                                  ") could not be written: ", m.reason));
              return;
            }
            struct NeverComing {
              int slot;
              std::uint32_t generation;
              std::size_t bytes;
            };
            std::optional<NeverComing> never_coming;  // the net message the receive expected
            std::shared_ptr<std::byte> unused_staging;  // dropped at the end of this handler, outside the lock
            {
              std::lock_guard lock(mutex);
              PeerState& state = peers[peer];
              auto it = state.posted_recvs.find({m.tag, m.seq});
              if (it == state.posted_recvs.end()) return;
              RequestState& request = *it->second;
              if (request.error) return;  // failed already (its pair failed): it keeps that error
              const std::string text = cat(describe(request.ctx), " (tag ", m.tag, "): peer ", peer, "'s send of ",
                                           m.send_bytes, " bytes failed: ", m.reason);
              // A mismatch is both sides' arguments; a write the peer could not make is the peer's failure alone.
              request.error = m.failure == Failure::Mismatch ? std::make_exception_ptr(InvalidArgument(text))
                                                             : std::make_exception_ptr(PeerError(text, peer));
              request.failed_alone = true;
              note_collective_loss_locked(request, text);  // before the word moves (a collective's receive)
              signals->store(peer, comm::kPeerSignalSlots + request.slot, request.generation);  // release stream waits
              // Nothing was written into its staging buffer, nor will be: back to the pool on this thread, rather
              // than with the request, which a check that on_stream left on a stream may hold past the communicator
              // (and free the buffer on the application's thread).
              unused_staging = std::move(request.staging);
              if (uses_net(peer) && request.ctx.bytes != 0) {
                never_coming = NeverComing{request.slot, request.generation, request.ctx.bytes};
              }
            }
#ifdef PICKLE_HAVE_LIBFABRIC
            // Its pieces' ids come round again once the slot's generation wraps (2^16 receives in that slot): they
            // must not still be expected then.
            if (never_coming) {
              for (std::size_t piece = 0; piece < comm::net_piece_count(never_coming->bytes); ++piece) {
                net->forget(peer, net_recv_message(never_coming->slot, never_coming->generation, piece));
              }
            }
#endif
          },
          [&](const ShmSendMessage& m) { handle_shm(peer, m); },
          [&](const ShmPutMessage& m) { handle_shm(peer, m); },
          [&](const ShmSignalMessage& m) { handle_shm(peer, m); },
          [&](const NetPutMessage& m) { handle_net(peer, m); },
          [&](const NetSignalMessage& m) { handle_net(peer, m); },
          [&](const NetEmptySendMessage& m) { handle_net(peer, m); },
          [&](const NetPutFailedMessage& m) { handle_net(peer, m); },
          [&](const ReleaseMessage& m) { ipc->cache().release(peer, m.alloc_id); },
          [&](const GoodbyeMessage&) {
            {
              std::lock_guard lock(mutex);
              peers[peer].said_goodbye = true;
            }
            // Whatever is still pending with a peer that closed its communicator can never complete.
            fail_peer(peer, cat("peer ", peer, " closed its communicator"));
          },
      },
      message);
}

void Communicator::Impl::handle_shm(int peer, const ShmSendMessage& m) {
  if (!uses_shm(peer)) throw ProtocolError(cat("rank ", info.rank, ": peer ", peer, " sent shm data but uses ipc"));
  std::lock_guard lock(mutex);
  auto it = peers[peer].posted_recvs.find({m.tag, m.seq});
  if (it == peers[peer].posted_recvs.end()) {
    // The receive failed and went meanwhile: the chunks must still be consumed, or the ring falls out of step.
    shm->receive(peer, m.first_chunk, nullptr, m.bytes, nullptr, 0);
    return;
  }
  const RequestState& request = *it->second;
  const int index = comm::kPeerSignalSlots + request.slot;
  std::uint32_t* sender_word = signals->remote_sent_word_for_streams(peer, index);
  if (request.error || request.ctx.bytes != m.bytes) {
    // The receive failed meanwhile: consume the chunks, and complete the send (its data is dropped).
    shm->receive(peer, m.first_chunk, nullptr, m.bytes, nullptr, request.generation, sender_word);
    return;
  }
  shm->receive(peer, m.first_chunk, request.dst, m.bytes, completion_word_for_streams(request), request.generation,
               sender_word);
}

void Communicator::Impl::handle_shm(int peer, const ShmPutMessage& m) {
  if (!uses_shm(peer)) throw ProtocolError(cat("rank ", info.rank, ": peer ", peer, " sent a shm put but uses ipc"));
  std::byte* dst = nullptr;
  {
    std::lock_guard lock(mutex);
    for (const auto& window : windows) {
      if (window->id != m.window) continue;
      const auto& mine = window->ranks[static_cast<std::size_t>(info.rank)];
      if (m.offset <= mine.bytes && m.bytes <= mine.bytes - m.offset) dst = static_cast<std::byte*>(window->local) + m.offset;
    }
  }
  if (dst == nullptr) {
    PICKLE_LOG(Error, "comm", "rank " << info.rank << ": peer " << peer << "'s put of " << m.bytes << " bytes at offset "
                                      << m.offset << " of window " << m.window << " does not fit; dropped");
  }
  shm->receive(peer, m.first_chunk, dst, m.bytes, nullptr, 0);
}

void Communicator::Impl::handle_shm(int peer, const ShmSignalMessage& m) {
  if (!uses_shm(peer) || m.slot >= static_cast<std::uint32_t>(comm::kPeerSignalSlots)) {
    throw ProtocolError(cat("rank ", info.rank, ": peer ", peer, " sent a bad shm signal (slot ", m.slot, ")"));
  }
  shm->receive(peer, m.first_chunk, nullptr, 0, signals->local_word_for_streams(peer, static_cast<int>(m.slot)), m.value);
}

void Communicator::Impl::fail_peer(int peer, const std::string& reason, bool timed_out) {
  // The transport lets go of the peer before the failure is reported: a failed send's source or receive's buffer
  // may be freed once it is. shm: streams waiting on the pair's staging rings go on, and their copies run through
  // (the rings stay mapped until the communicator closes). net: the peer's unfinished writes are dropped and its
  // endpoints closed, so that no write still reads a source and no late byte lands in a receive's buffer, and the
  // transport's flush at teardown no longer waits PICKLE_TIMEOUT for writes that will never complete.
  bool closed_normally;  // a peer that said goodbye has nothing in flight
  {
    std::lock_guard lock(mutex);
    PeerState& state = peers[peer];
    closed_normally = state.said_goodbye;
    // shm: once per pair, before the first release: a second caller (the progress thread and a transport's callback
    // may both get here) must not take it while the first one's release is completing the pair's receives.
    if (uses_shm(peer) && !state.failed && !state.unfinished_at_release) {
      state.unfinished_at_release = mark_unfinished_with_locked(peer);
    }
    // Before any release: a released shm ring lets the pair's receiving stream complete receives with what the
    // ring's slots held, here and (given up below, the peer alive) at the peer, which may not note it in time.
    if (!state.failed) note_collective_losses_with_locked(peer, reason, uses_shm(peer) && !closed_normally);
  }
  if (uses_shm(peer)) {
    // A peer that did not close normally may be alive (stopped, slow, or out of step rather than dead): it must not
    // report what the released ring lets through to its streams (the slots' stale bytes) as received.
    if (!closed_normally) shm->give_up(peer);
    shm->release(peer, Deadline::after_seconds(timeout_seconds));
  }
#ifdef PICKLE_HAVE_LIBFABRIC
  if (uses_net(peer)) {
    // Waiting for the endpoints of a peer that closed normally (about 20 ms each, on this thread) would only make a
    // job's close take that long per peer.
    if (closed_normally) {
      net->release_closed_peer(peer);
    } else {
      net->release(peer, Deadline::after_seconds(timeout_seconds));
    }
  }
#endif
  std::lock_guard lock(mutex);
  const auto& before = peers[peer].unfinished_at_release;
  fail_peer_locked(peer, reason, before ? &*before : nullptr, timed_out);
}

void Communicator::Impl::fail_peer_that_may_be_alive(int peer, const std::string& reason) {
  if (uses_shm(peer)) {
    // Released rings would let the live peer's receiving stream take the slots' stale bytes for its messages. A
    // failure under way (the peer died) has recorded what was unfinished before its release: fail_peer joins it and
    // hands that record on. Checked and failed under one hold of the lock, which that failure takes to record it.
    std::lock_guard lock(mutex);
    if (!peers[peer].unfinished_at_release) {
      shm->stop(peer);
      fail_peer_locked(peer, reason);
      return;
    }
  }
  fail_peer(peer, reason);
}

std::string Communicator::Impl::gave_up_text(int rank, int peer) {
  return cat("peer ", peer, " gave up its shm pair with rank ", rank,
             " (its side of the pair failed, or it closed with copies still queued): what the pair delivered since "
             "cannot be trusted");
}

bool Communicator::Impl::peer_gave_up(int peer) const {
  PairFailure& record = *peers[static_cast<std::size_t>(peer)].failure_record;
  std::lock_guard lock(record.mutex);
  return record.peer_gave_up();
}

bool Communicator::Impl::fail_because_peer_gave_up(RequestState& request) {
  const int peer = request.ctx.peer;
  const std::string reason = gave_up_text(info.rank, peer);
  // Once: later callers find the pair failed. Neither marks the pair given up in turn (the peer's own failure
  // settled what it had received) nor moves the rings' flags again (the peer released them, or stopped and left
  // them: ShmTransport::give_up, StagingRing::release).
  fail_peer(peer, reason);
  std::lock_guard lock(mutex);
  if (request.reported_complete) return true;  // by another thread, meanwhile: it stays complete
  // fail_peer leaves a request whose word its completion reached (through the given-up rings, or before): which of
  // the two it was cannot be told, so it fails too.
  if (!request.error) {
    const std::string text = cat(describe(request.ctx), " (tag ", request.tag, "): ", reason);
    request.error = std::make_exception_ptr(PeerError(text, peer));
  }
  std::rethrow_exception(request.error);
}

void Communicator::Impl::keep_last_gave_up_words() {
  for (int peer = 0; peer < info.world_size; ++peer) {
    PairFailure& record = *peers[static_cast<std::size_t>(peer)].failure_record;
    std::lock_guard lock(record.mutex);
    record.peer_gave_up_at_close = record.peer_gave_up();
    record.peer_gave_up_word = nullptr;
  }
}

Communicator::Impl::UnfinishedWithPeer Communicator::Impl::mark_unfinished_with_locked(int peer) {
  const PeerState& state = peers[peer];
  UnfinishedWithPeer unfinished;
  for (const auto& [slot, send] : state.sends_in_flight) {
    if (send && !send->error && !completed_locked(*send)) send->unfinished_at_release = true;
  }
  for (const auto& [key, request] : state.posted_recvs) {
    if (!request->error && !request->landed && !completed_locked(*request)) request->unfinished_at_release = true;
  }
  for (int slot = 0; slot < comm::kPeerSignalSlots; ++slot) unfinished.signals.push_back(signals->load(peer, slot));
  return unfinished;
}

void Communicator::Impl::fail_peer_locked(int peer, const std::string& reason, const UnfinishedWithPeer* before,
                                          bool timed_out) {
  PeerState& state = peers[peer];
  // Once only: everything pending failed the first time, later calls are refused at once, and a second release
  // would move the words another 2^30 ahead, where a wait for a value the peer had reached reads them as behind.
  if (state.failed) return;
  // Before the receives' words move below (fail_peer noted them already, unless a caller came here directly).
  note_collective_losses_with_locked(peer, reason);
  state.failed = true;
  state.failure = reason;
  int failed = 0;
  for (auto& [tag, sends] : state.pending_sends) {
    for (auto& send : sends) {
      if (send->counts_as_unmatched()) unmatched_sends.fetch_sub(1);
      if (send->error) continue;  // failed alone before (its stream refused it): it keeps that error
      send->error = std::make_exception_ptr(PeerError(cat(describe(send->ctx), ": ", reason), peer));
      ++failed;
    }
    sends.clear();
  }
  state.pending_posts.clear();
  // Net and shm sends under way: nothing will move their "sent" words now (net: the transport drops their writes'
  // completions with the peer; shm: the peer's stream will not copy them out), so release them from here.
  for (auto& [slot, send] : state.sends_in_flight) {
    const int index = comm::kPeerSignalSlots + slot;
    if (!send) continue;
    const bool unfinished_before = before != nullptr && send->unfinished_at_release;
    if (!unfinished_before &&
        (send->error || device::host::flag_reached(signals->load_sent(peer, index), send->generation))) {
      continue;
    }
    if (!send->error) send->error = std::make_exception_ptr(PeerError(cat(describe(send->ctx), ": ", reason), peer));
    signals->advance_sent(peer, index, send->generation);  // release stream waits
    ++failed;
  }
  state.sends_in_flight.clear();
  // shm puts whose streams may still wait for their source to be read: the sending stream stops copying to the
  // peer, so release each slot's latest put here (earlier ones on a slot had completed: puts reuse a slot only
  // then). Their queued writes, if any still run, carry the same values.
  for (int slot = 0; slot < comm::kShmPutSlots; ++slot) {
    const std::uint32_t latest = state.shm_put_generation[static_cast<std::size_t>(slot)];
    if (latest != 0) signals->advance_sent(peer, comm::kShmPutWordBase + slot, latest);
  }
  for (auto& [key, request] : state.posted_recvs) {
    const bool unfinished_before = before != nullptr && request->unfinished_at_release;
    if (!unfinished_before &&
        (request->error || request->landed ||
         device::host::flag_reached(signals->load(peer, comm::kPeerSignalSlots + request->slot),
                                    request->generation))) {
      continue;  // it completed (or failed) before the peer went away
    }
    ++failed;
    auto error = std::make_exception_ptr(PeerError(cat(describe(request->ctx), ": ", reason), peer));
    // Once the copies into its buffer that are queued ran, where it can be deferred.
    if (!request->error && request->pieces_copied > 0 && fail_recv_after_copies_locked(request, error)) continue;
    if (!request->error) request->error = error;
    signals->store(peer, comm::kPeerSignalSlots + request->slot, request->generation);  // release stream waits
    // Its staging buffer is never reused: writes of a peer that is slow rather than dead could still land in it.
    if (request->staging) quarantined.push_back(std::move(request->staging));
  }
  // A peer that closes normally has nothing pending with us: that is worth a debug line, not a warning.
  if (failed > 0) {
    PICKLE_LOG(Warn, "comm", reason << "; " << failed << " pending operation(s) with it failed");
  } else {
    PICKLE_LOG(Debug, "comm", reason);
  }
  // Release stream waits on the peer's signal slots too (the application's, the collectives' ready and token
  // slots): a value 2^30 ahead of what the slot reached satisfies every wait for a value up to 2^30 ahead of it,
  // which the peer could still have been expected to raise, and every wait up to 2^30 behind it, which the peer had
  // raised but a stream had not got to yet (the ordered pipeline queues such waits chunks ahead). 2^31 - 1 ahead, as
  // here until 2026-11-28, turned those behind into waits that never pass (wait_value's comparison is cyclic: a
  // word more than 2^31 past the value reads as behind it). Later calls naming the peer fail with PeerError. What
  // each slot had reached first tells a released wait from a signalled one (check_wait).
  PairFailure& record = *state.failure_record;
  std::lock_guard record_lock(record.mutex);
  record.failed = true;
  record.timed_out = timed_out;
  record.reason = reason;
  record.net_put_missing = first_missing_net_put(state);
  for (int slot = 0; slot < comm::kPeerSignalSlots; ++slot) {
    const std::uint32_t reached =
        before != nullptr ? before->signals[static_cast<std::size_t>(slot)] : signals->load(peer, slot);
    record.signals[static_cast<std::size_t>(slot)] = reached;
    signals->store(peer, slot, reached + kReleaseDistance);
  }
  // The peer's mappings stay: copies into them may still be queued on streams, and the memory they map stays valid
  // (our import holds it) until the communicator is destroyed.
}

}  // namespace pickle
