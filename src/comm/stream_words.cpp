// The application's streams and the communicator's signal words at teardown. Streams wait on the words (on_stream,
// wait, the collectives' ready waits) and write into the peers' (ipc sends and signals); the contract asks the
// application to synchronize them before destroying the communicator. Where it did not, freeing the words would
// leave a stream reading unmapped memory: a SIGSEGV of a host stream's thread, a fault of a GPU stream reading
// unregistered host memory. So teardown ends (retire_signal_area) by releasing the waits that can never complete and
// by freeing the words only once no stream can touch them any more; otherwise it keeps them until the process exits.
#include <algorithm>
#include <set>

#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "core/error_text.hpp"
#include "core/log.hpp"
#include "device/host/backoff.hpp"

namespace pickle {
namespace {

/// How long teardown lets the noted streams pass their ends when nothing was pending. An idle stream gets there at
/// once; one still behind after this is held by something else (a kernel, another communicator's wait), and waiting
/// longer would only hold up the teardown, when keeping the words costs some KiB (SignalArea::keep_until_exit).
constexpr double kStreamsGraceSeconds = 1.0;

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return without_head(e.what());
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

void Communicator::Impl::note_stream_on_words_locked(device::Stream& stream) {
  auto [entry, added] = streams_on_words.try_emplace(stream.serial());
  if (!added) return;
  entry->second = stream.weak_from_this();
  if (entry->second.expired()) {
    streams_on_words.erase(entry);  // a transport's own stream: destroyed before the words
    return;
  }
  // Streams that went are forgotten, so that an application that makes a stream per step does not grow the map.
  std::erase_if(streams_on_words, [](const auto& noted) { return noted.second.expired(); });
}

void Communicator::Impl::wait_signal_on_stream(device::Stream& stream, int peer, int slot, std::uint32_t expected) {
  stream.wait_value(signals->local_word_for_streams(peer, slot), expected);
  ipc->note_wait_on(stream);
  std::lock_guard lock(mutex);
  note_signal_wait_locked(stream, peer, slot, expected);
}

void Communicator::Impl::wait_signals_on_stream(device::Stream& stream, int slot,
                                                std::span<const comm::SignalTarget> waits) {
  std::vector<device::Stream::Flag> flags;
  for (const comm::SignalTarget& wait : waits) {
    flags.push_back({signals->local_word_for_streams(wait.peer, slot), wait.expected});
  }
  stream.wait_values(flags);
  ipc->note_wait_on(stream);
  note_signal_waits(stream, slot, waits);
}

void Communicator::Impl::note_signal_waits(device::Stream& stream, int slot,
                                           std::span<const comm::SignalTarget> waits) {
  std::lock_guard lock(mutex);
  for (const comm::SignalTarget& wait : waits) note_signal_wait_locked(stream, wait.peer, slot, wait.expected);
}

void Communicator::Impl::note_signal_wait_locked(device::Stream& stream, int peer, int slot, std::uint32_t expected) {
  note_stream_on_words_locked(stream);
  PeerState& state = peers[static_cast<std::size_t>(peer)];
  std::uint32_t& awaited = state.signals_awaited[static_cast<std::size_t>(slot)];
  if (!device::host::flag_reached(awaited, expected)) awaited = expected;
  for (std::size_t i = 0; i < kWatchedSlots.size(); ++i) {
    if (kWatchedSlots[i] != slot) continue;
    PeerState::WatchedWait& watched = state.watched[i];
    const std::uint32_t value = signals->load(peer, slot);
    if (device::host::flag_reached(value, expected)) break;
    // Timed from now unless an earlier wait is still pending and the word has not moved since it was last seen (then
    // from that earlier point: nothing has come since).
    if (!watched.pending || value != watched.seen) {
      watched = {.pending = true, .seen = value, .since = std::chrono::steady_clock::now()};
    }
    watching.store(true);
  }
}

void Communicator::Impl::watch_stalled_waits() {
  // Less than PICKLE_TIMEOUT by a margin: the stream's synchronize gives up after PICKLE_TIMEOUT from its start, which
  // comes after the waits were enqueued, and its TimeoutError cannot say which peer held it; this one can.
  const double margin = std::min(1.0, timeout_seconds / 10);
  const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(0.0, timeout_seconds - margin)));
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<int, std::string>> stalled;
  {
    std::lock_guard lock(mutex);
    bool any = false;
    for (int peer = 0; peer < info.world_size; ++peer) {
      PeerState& state = peers[static_cast<std::size_t>(peer)];
      if (peer != info.rank && !state.failed && same_host[static_cast<std::size_t>(peer)]) {
        if (const std::uint32_t word = signals->load(peer, comm::kOutOfStepWord); word != 0) {
          stalled.emplace_back(peer, comm::out_of_step_reason(peer, word));
          continue;
        }
      }
      for (std::size_t i = 0; i < kWatchedSlots.size(); ++i) {
        PeerState::WatchedWait& watched = state.watched[i];
        if (!watched.pending) continue;
        const int slot = kWatchedSlots[i];
        const std::uint32_t value = signals->load(peer, slot);
        const std::uint32_t awaited = state.signals_awaited[static_cast<std::size_t>(slot)];
        if (state.failed || device::host::flag_reached(value, awaited)) {
          watched.pending = false;
          continue;
        }
        any = true;
        // Timed only once this rank's own stream has got to the wait: it raised its own count of the same slot to
        // the peer just before (the filled count of the same call; for the emptied wait, which comes kMailboxDepth - 1
        // calls later, that many emptied counts after). A stream held up by earlier work (queues deeper than
        // PICKLE_TIMEOUT) does not fail a pair that is only slow.
        const std::uint32_t lead = slot == comm::kMailboxEmptiedSlot ? comm::kMailboxDepth - 1 : 0;
        const bool here = device::host::flag_reached(signals->load_remote(peer, slot), value + 1 + lead);
        if (value != watched.seen || !here) {  // it moves (the peer is in step, only slower), or not there yet
          watched.seen = value;
          watched.since = now;
        } else if (now - watched.since >= limit) {
          stalled.emplace_back(peer, cat("peer ", peer, " did not raise ", comm::signal_slot_name(slot), " from ",
                                         value, " to ", awaited, " within ", timeout_seconds,
                                         " s (PICKLE_TIMEOUT) while this rank's streams waited for it: is it in the "
                                         "same collectives, in the same order, with the same counts?"));
          break;
        }
      }
    }
    if (!any) watching.store(false);
  }
  for (const auto& [peer, reason] : stalled) {
    PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": " << reason);
    const bool out_of_step = signals->load(peer, comm::kOutOfStepWord) != 0;
    fail_peer(peer, reason, /*timed_out=*/!out_of_step);
  }
}

bool Communicator::Impl::completed_locked(const RequestState& request) const {
  if (request.error) return false;
  const int index = comm::kPeerSignalSlots + request.slot;
  // Only net and shm sends are followed after they were enqueued (sends_in_flight): they complete on "sent" words.
  const std::uint32_t word = request.kind == RequestState::Kind::Recv ? signals->load(request.ctx.peer, index)
                                                                      : signals->load_sent(request.ctx.peer, index);
  return device::host::flag_reached(word, request.generation);
}

bool Communicator::Impl::signal_reached_locked(int peer, int slot, std::uint32_t expected) const {
  PairFailure& record = *peers[static_cast<std::size_t>(peer)].failure_record;
  std::lock_guard record_lock(record.mutex);
  const std::uint32_t reached = record.failed ? record.signals[static_cast<std::size_t>(slot)] : signals->load(peer, slot);
  return device::host::flag_reached(reached, expected);
}

Communicator::Impl::StreamWaitsAtClose Communicator::Impl::stream_waits_at_close() const {
  StreamWaitsAtClose waits;
  std::lock_guard lock(mutex);
  for (int peer = 0; peer < info.world_size; ++peer) {
    const PeerState& state = peers[static_cast<std::size_t>(peer)];
    if (peer == info.rank || state.failed) continue;
    // A request that failed alone (a size mismatch, a net send never written) had its word released: no stream is
    // held on it, and its own error is what its streams report.
    auto note = [&](const std::shared_ptr<RequestState>& request) {
      if (request && !request->waiting_streams.empty() && !request->error && !completed_locked(*request)) {
        waits.requests.push_back(request);
      }
    };
    for (const auto& [key, recv] : state.posted_recvs) note(recv);
    for (const auto& [slot, send] : state.sends_in_flight) note(send);
    for (int slot = 0; slot < comm::kPeerSignalSlots; ++slot) {
      const std::uint32_t awaited = state.signals_awaited[static_cast<std::size_t>(slot)];
      if (!signal_reached_locked(peer, slot, awaited)) waits.signals.push_back({peer, slot, awaited});
    }
  }
  return waits;
}

std::set<int> Communicator::Impl::peers_streams_still_wait_on_locked(const StreamWaitsAtClose& at_close) const {
  std::set<int> pending_peers;
  for (const auto& request : at_close.requests) {
    if (!request->error && !completed_locked(*request)) pending_peers.insert(request->ctx.peer);
  }
  for (const auto& wait : at_close.signals) {
    if (!signal_reached_locked(wait.peer, wait.slot, wait.expected)) pending_peers.insert(wait.peer);
  }
  // A pair that failed since has had its waits released already.
  std::erase_if(pending_peers, [&](int peer) { return peers[static_cast<std::size_t>(peer)].failed; });
  return pending_peers;
}

std::string Communicator::Impl::closed_while_streams_waited(int peer) const {
  return cat("rank ", info.rank, " destroyed its communicator while streams still waited on operations with peer ",
             peer);
}

void Communicator::Impl::release_stream_waits_locked(const StreamWaitsAtClose& at_close) {
  // Released as a peer failure would (a pair the peer's goodbye failed already is left as it is): every stream wait
  // on the pair's words passes, and the checks after signal waits (check_wait) report theirs. The transports are
  // gone by now: nothing of theirs is to be released first (fail_peer).
  for (int peer : peers_streams_still_wait_on_locked(at_close)) fail_peer_locked(peer, closed_while_streams_waited(peer));
}

void Communicator::Impl::retire_signal_area(const StreamWaitsAtClose& at_close) {
  std::vector<std::string> released;  // what never completed, for the log
  struct StreamError {
    std::weak_ptr<device::Stream> stream;
    std::string message;
    int peer;
  };
  std::vector<StreamError> stream_errors;
  std::vector<std::weak_ptr<device::Stream>> noted;
  {
    std::lock_guard lock(mutex);
    // What was still awaited at the start of the teardown may have completed since (the barrier lets the peers
    // finish writing); what has not never will: the peers said goodbye, the progress thread and transports are gone.
    release_stream_waits_locked(at_close);
    for (const auto& request : at_close.requests) {
      if (completed_locked(*request)) continue;
      const PeerState& state = peers[static_cast<std::size_t>(request->ctx.peer)];
      // Failed alone since the teardown began (a size mismatch): its streams report its own error. (Whether its pair
      // failed says nothing: the peer's goodbye fails the pair and leaves a request that failed before as it is.)
      if (request->failed_alone) continue;
      const std::string what = cat(describe(request->ctx), " (tag ", request->tag, ")");
      // Its pair has failed by now (above, or before: the peer's goodbye); the rest is only a fallback.
      const std::string cause = state.failed    ? state.failure
                                : request->error ? message_of(request->error)
                                                 : std::string("it had not completed");
      released.push_back(what);
      const std::string message =
          cat(what, ": the communicator was destroyed before this ",
              request->kind == RequestState::Kind::Recv ? "receive" : "send", " completed (", cause,
              "), and the stream's wait on it (Request::on_stream) was released without it; synchronize streams "
              "before destroying the communicator");
      // Reported by the request's own checks on its streams (Request::on_stream: report_on_stream); streams that the
      // collectives made wait on it have none.
      request->error = std::make_exception_ptr(PeerError(message, request->ctx.peer));
      if (request->reported_on_streams) continue;
      for (const auto& stream : request->waiting_streams) stream_errors.push_back({stream, message, request->ctx.peer});
    }
    for (const auto& wait : at_close.signals) {
      if (signal_reached_locked(wait.peer, wait.slot, wait.expected)) continue;
      released.push_back(cat(describe({.rank = info.rank, .peer = wait.peer, .op = "wait"}), " for ",
                             comm::signal_slot_name(wait.slot),
                             " to reach ", wait.expected));
    }
    for (const auto& [serial, stream] : streams_on_words) noted.push_back(stream);
  }
  // The completion lanes write the peers' words (ipc sends in a burst): the words stay until they have passed too.
  if (transport::ipc::CompletionLanes* lanes = ipc ? ipc->completion_lanes() : nullptr) {
    for (const auto& stream : lanes->streams()) noted.push_back(stream);
  }
  // Checks at the streams' current ends, which are past their waits: the stream reports the error at the
  // synchronize that finds it past them, and holds nothing of this communicator meanwhile.
  for (const StreamError& error : stream_errors) {
    std::shared_ptr<device::Stream> stream = error.stream.lock();
    if (!stream) continue;
    try {
      stream->check_when_passed([message = error.message, peer = error.peer] { throw PeerError(message, peer); });
    } catch (const std::exception& e) {
      PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": could not report on a stream that " << error.message << ": "
                                       << e.what());
    }
  }
  if (!released.empty()) {
    std::string list;
    for (const std::string& what : released) list += cat(list.empty() ? "" : "; ", what);
    PICKLE_LOG(Error, "comm", "rank " << info.rank << ": communicator destroyed while streams still waited on it: "
                                      << list << ". Those waits were released without what they waited for (the "
                                      "streams' next synchronize throws PeerError), and the communicator's signal "
                                      "words are kept until the process exits, since a stream may still read them; "
                                      "synchronize streams before destroying the communicator");
    comm::SignalArea::keep_until_exit(std::move(signals));
    return;
  }
  if (shm_streams_left_running) {
    PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": the communicator's signal words are kept until the process "
                                     "exits: shm streams of a peer that was stopped at the close may still write them");
    comm::SignalArea::keep_until_exit(std::move(signals));
    return;
  }
  // Nothing pending, but a stream may not have reached a wait whose word is there already, or an ipc write into a
  // peer's word: the words go once every noted stream has passed its current end.
  std::vector<std::unique_ptr<device::Event>> ends;
  bool recorded = true;
  for (const auto& weak : noted) {
    std::shared_ptr<device::Stream> stream = weak.lock();
    // Gone: a host stream ran or dropped its work first. (A CUDA stream still runs what it had queued; with nothing
    // pending its waits find their words there already, so it is past them within microseconds.)
    if (!stream) continue;
    try {
      ends.push_back(device::make_ordering_event(stream->kind(), std::max(0, stream->device())));
      stream->record(*ends.back());
    } catch (const std::exception& e) {
      PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": teardown could not mark a stream's end: " << e.what());
      recorded = false;
    }
  }
  const bool passed = recorded && poll_until(Deadline::after_seconds(kStreamsGraceSeconds), [&] {
    try {
      return std::all_of(ends.begin(), ends.end(), [](const auto& end) { return end->query(); });
    } catch (const std::exception&) {
      return false;  // until the deadline: keep the words rather than guess
    }
  });
  if (!passed) {
    PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": communicator destroyed while a stream that waits on or writes "
                                     "its signal words had not passed them after " << kStreamsGraceSeconds << " s; "
                                     "the words are kept until the process exits; synchronize streams before "
                                     "destroying the communicator");
    comm::SignalArea::keep_until_exit(std::move(signals));
  }
}

}  // namespace pickle
