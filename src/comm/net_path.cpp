// The communicator over the net transport (libfabric, docs/rdma.md): a send is RMA writes straight into the posted
// receive buffer, each carrying the receive's message id, and the receiver's transport completes the recv once all
// of them landed; a put is RMA writes into the peer's window, and a signal waits (at the receiver) until every
// earlier put of its sender has landed. Host memory only in this build. Between hosts the control channel is TCP;
// PICKLE_TRANSPORT=net forces the transport between ranks of one host too.
#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "comm/net_pieces.hpp"
#include "core/error_text.hpp"
#include "core/log.hpp"

namespace pickle {

std::string Communicator::Impl::first_missing_net_put(const PeerState& state) {
  const auto sequence = static_cast<std::uint32_t>(state.net_puts_landed.count() & 0x7fffffffu);
  const auto found = state.net_puts_announced.find(sequence);
  if (found == state.net_puts_announced.end()) return "";
  return cat("put #", sequence, " of ", found->second, " bytes");
}

void Communicator::Impl::copy_staged_piece(const StagedPiece& piece) {
  // On the staging enqueuer: the decision under `mutex`, the stream operations without it (a full stream blocks its
  // enqueuer until host callbacks ran, and those take `mutex`). Ordered against fail_peer all the same: a failure
  // that comes between the two posts its deferred report to this worker, so it is queued after this copy.
  std::shared_ptr<std::byte> buffer;  // once every piece's copy is queued: back to the pool after them
  bool last = false;
  {
    std::lock_guard lock(mutex);
    const auto& owner = peers[piece.peer].slot_owner[piece.slot];
    if (!owner || owner->generation != piece.generation || owner->error || peers[piece.peer].failed) return;
    last = ++owner->pieces_copied == piece.pieces;
    if (last) {
      owner->landed = true;
      buffer = std::move(owner->staging);
    }
  }
  const int index = comm::kPeerSignalSlots + piece.slot;
  bool completion_queued = false;
  try {
    staging_stream->copy(piece.dst, piece.landed, piece.length);
    if (!last) return;
    staging_stream->write_value(signals->local_word_for_streams(piece.peer, index), piece.generation);
    completion_queued = true;
    // The buffer goes back to the pool once the copies out of it are done (a host callback after them), not when the
    // RequestState goes: slot_owner and posted_recvs hold that until the peer's completion slots wrap, and a loop of
    // receives would keep a pinned, registered buffer per receive. No peer writes into it any more: every chunk of
    // the message has landed, and a landed receive is never failed (so never quarantined).
    staging_stream->host_callback([buffer]() mutable { buffer.reset(); });
  } catch (const std::exception& e) {
    // The stream refused work (a broken stream runs none after it). The receive fails unless its completion is
    // queued, so that a later piece cannot complete it with this one missing; its staging buffer is never handed
    // out again (a copy queued before may still read it).
    std::lock_guard lock(mutex);
    if (buffer) quarantined.push_back(std::move(buffer));
    const auto& owner = peers[piece.peer].slot_owner[piece.slot];
    if (!completion_queued && owner && owner->generation == piece.generation) {
      if (owner->staging) quarantined.push_back(std::move(owner->staging));
      if (!owner->error) {
        owner->error = std::make_exception_ptr(Error(
            ErrorCode::System, cat(describe(owner->ctx), ": queuing the copy of a landed piece into place: ", e.what())));
        owner->failed_alone = true;
      }
      note_collective_loss_locked(*owner, cat(describe(owner->ctx), ": the staging stream refused the copy of its "
                                              "data: ", e.what()));
      signals->store(piece.peer, index, piece.generation);  // releases what waits for it
    }
    PICKLE_LOG(Warn, "comm", "rank " << info.rank << " <- peer " << piece.peer << ": staged receive of slot "
                                     << piece.slot << ": the staging stream refused work: " << e.what());
  }
}

bool Communicator::Impl::fail_recv_after_copies_locked(const std::shared_ptr<RequestState>& recv,
                                                       std::exception_ptr error) {
  // Some of its pieces' copies into place are queued on the staging stream: the failure is reported (the error set,
  // the word moved for streams that wait on it) from a host callback after them, so that the application, once it
  // heard, may reuse or free the buffer with nothing of this receive still writing into it. (The copies take
  // milliseconds; the stream runs nothing that waits.) Its staging buffer is never reused: queued copies read it.
  // Not once the teardown drained the staging stream for the last time (nothing of it is queued then, and a callback
  // would run after `mutex` and `signals` are gone), nor when the stream refuses the callback (a broken stream runs
  // no copy either): the caller then fails the receive at once.
  if (staging_drained) return false;
  const int peer = recv->ctx.peer;
  const int index = comm::kPeerSignalSlots + recv->slot;
  const std::uint32_t generation = recv->generation;
  auto report = [this, recv, error, peer, index, generation] {
    std::lock_guard lock(mutex);
    if (!recv->error) recv->error = error;
    signals->store(peer, index, generation);
  };
  // Through the staging enqueuer, after the copies it queued (this runs under `mutex`, which must not be held while
  // a stream operation may block).
  staging_enqueuer->post([this, recv, report] {
    try {
      staging_stream->host_callback(report);
    } catch (const std::exception& e) {
      PICKLE_LOG(Warn, "comm", describe(recv->ctx) << ": failed at once, the staging stream refused its deferred "
                                                       "failure: " << e.what());
      report();
    }
  });
  if (recv->staging) quarantined.push_back(std::move(recv->staging));
  return true;
}

#ifdef PICKLE_HAVE_LIBFABRIC

namespace {
// A net send's pieces, shared by their stream callbacks (which run one after another, in stream order) and by their
// writes' completions (on the transport's threads).
struct SendPieces {
  explicit SendPieces(std::size_t count) : unsent(count) {}
  std::atomic<std::size_t> unsent;  // pieces whose writes have not all completed
  bool written = false;             // a piece's writes went to the transport
  std::exception_ptr failed;        // the write that could not be made: the pieces after it write nothing
};
}  // namespace

Communicator::Impl::MatchedSend Communicator::Impl::claim_net_send(int peer,
                                                                   const std::shared_ptr<RequestState>& request,
                                                                   const RecvPostMessage& post,
                                                                   device::Stream& stream) {
  RequestState& send = *request;
  send.slot = static_cast<int>(post.slot);
  send.generation = post.generation;
  send.enqueued = true;
  peers[peer].sends_in_flight[send.slot] = request;
  // From here the send is the pair's: a failure of the pair fails it and moves its word, whether or not its stream
  // operations are queued yet (their callbacks then find the peer failed, and the send's error already set).
  return {.send = request,
          .enqueue =
              [this, peer, request, post, on = &stream] {
                enqueue_net_send(peer, request, post, *on);
                return std::optional<ControlMessage>();  // a failure is the send's own (fail_net_send)
              },
          .reply = std::nullopt};
}

void Communicator::Impl::enqueue_net_send(int peer, const std::shared_ptr<RequestState>& request,
                                          const RecvPostMessage& post, device::Stream& stream) {
  RequestState& send = *request;
  const int slot = static_cast<int>(post.slot);
  const int index = comm::kPeerSignalSlots + slot;
  std::size_t pieces_queued = 0;  // pieces whose write the stream may have taken: they may be written
  std::shared_ptr<std::byte> staged;
  try {
    wait_for_callers_point(send, stream);  // before any piece: a point never reached fails the send alone
    if (post.bytes == 0) {
      // In stream order like every other send, not at once: a broadcast's ready message is an empty send that
      // must leave only when the caller's stream has reached the call (before it, the peer would write into a
      // buffer that this rank's earlier stream work still uses).
      ++pieces_queued;
      on_application_stream(
          stream,
          [this, peer, index, slot = post.slot, generation = post.generation] {
            signals->advance_sent(peer, index, generation);
            send_control(peer, NetEmptySendMessage{.slot = slot, .generation = generation});
          },
          [this, peer, request] {
            const Error dropped(ErrorCode::System, cat("queuing the send on its stream: ", kDroppedByItsStream));
            fail_net_send(peer, request, dropped, /*partly_written=*/false);
          });
      return;
    }
    // The message goes as pieces (comm/net_pieces.hpp), each a message of its own to the transport, so that a staged
    // receiver copies each into place as soon as it landed. Each piece is handed to the transport from a host
    // callback on the send's stream, in stream order: after the producer, and when staged after the copy engine
    // copied the piece into a pinned buffer, while the next piece is copied (the buffer goes back to the pool, and
    // the send completes, with the last piece's writes). The transport returns at once and the data flows from its
    // progress threads; the Request completes when every piece's writes did (the source may then be reused).
    const transport::net::RemoteRegion dst{post.net_addr, post.net_key};
    transport::net::NetTransport* transport = net.get();
    const comm::SignalArea* words = signals.get();  // outlives the transport, which is destroyed first
    const std::uint32_t generation = post.generation;
    const std::size_t bytes = post.bytes;
    const std::size_t pieces = comm::net_piece_count(bytes);
    if (stage_net) staged = staging->take(bytes);
    auto shared = std::make_shared<SendPieces>(pieces);
    for (std::size_t index_of_piece = 0; index_of_piece < pieces; ++index_of_piece) {
      const comm::NetPiece part = comm::net_piece(bytes, index_of_piece);
      const std::size_t offset = part.offset, length = part.length;
      const bool last = index_of_piece + 1 == pieces;
      const std::byte* from = static_cast<const std::byte*>(send.src) + offset;
      if (staged) {
        stream.copy(staged.get() + offset, from, length);
        from = staged.get() + offset;
      }
      const transport::net::RemoteRegion to{dst.addr + offset, dst.key};
      const std::uint32_t message = net_recv_message(slot, generation, index_of_piece);
      ++pieces_queued;  // counted before: a host callback that throws may have been queued in part, and still run
      const bool first = index_of_piece == 0;
      auto write_piece = [this, request, transport, words, peer, from, length, to, message, index, generation,
                          staged, shared, first, last] {
        // A collective's data that this rank, or a peer on its host, may have computed without data it lost
        // (collective_loss): refused before anything of it is written, which fails the pair on both sides
        // (fail_net_send), so that the receiver does not take it for a result. Read once the stream got here:
        // the loss was noted before the stream could pass the failed receive.
        if (first && request->collective_call != 0) {
          if (auto loss = collective_loss(request->collective_call, "not written")) {
            shared->failed = std::make_exception_ptr(*loss);
          }
        }
        if (!shared->failed) {
          try {
            transport->write(peer, from, length, to, message, [words, peer, index, generation, staged, shared] {
              if (shared->unsent.fetch_sub(1) == 1) words->advance_sent(peer, index, generation);
            });
            shared->written = true;
          } catch (const Error&) {
            shared->failed = std::current_exception();
          }
        }
        // A failed send is reported from the last piece's callback, once the stream has copied every piece: until
        // then it still reads the source, which the application may reuse as soon as it hears that the send is
        // over. Nothing else would ever move its word. Pieces written before the failure may still land: the pair
        // fails.
        if (!last || !shared->failed) return;
        try {
          std::rethrow_exception(shared->failed);
        } catch (const Error& e) {
          fail_net_send(peer, request, e, shared->written);
        }
      };
      // Dropped unrun by its stream (a wait queued ahead of it gave up), the last piece reports the send as its
      // callback would have: stopped by the stream, or by an earlier piece's write. A stream drops everything queued
      // after the wait that gave up, so the last piece goes with any other.
      std::function<void()> if_dropped;
      if (last) {
        if_dropped = [this, request, peer, shared] {
          const Error dropped(ErrorCode::System, cat("queuing the send on its stream: ", kDroppedByItsStream));
          if (!shared->failed) return fail_net_send(peer, request, dropped, shared->written);
          try {
            std::rethrow_exception(shared->failed);
          } catch (const Error& e) {
            fail_net_send(peer, request, e, shared->written);
          }
        };
      }
      on_application_stream(stream, std::move(write_piece), std::move(if_dropped));
    }
  } catch (const std::exception& e) {
    // The stream refused work (a broken stream, or no memory for a staging buffer). Pieces already queued may write
    // when the stream runs them, and no last piece will report: the pair fails, so that none of them lands after the
    // receiver heard. With none queued, the send alone fails, as for a write that the transport refused. A copy into
    // the staging buffer may be queued with no callback after it to hold the buffer: it is never handed out again.
    if (staged) {
      std::lock_guard lock(mutex);
      quarantined.push_back(std::move(staged));
    }
    if (ipc) ipc->clear_copy_stream_error(peer, stream);
    const Error cause(ErrorCode::System, cat("queuing the send on its stream after ", pieces_queued, " of its pieces: ",
                                             without_head(e.what())));  // fail_net_send names the send
    try {
      fail_net_send(peer, request, cause, /*partly_written=*/pieces_queued > 0);
    } catch (const std::exception& failure) {
      PICKLE_LOG(Warn, "comm", describe(send.ctx) << ": failing the send that its stream refused: " << failure.what());
    }
  }
}

void Communicator::Impl::fail_net_send(int peer, const std::shared_ptr<RequestState>& request, const Error& cause,
                                       bool partly_written) {
  // Not a failure of the pair, as a failed put is, when nothing of the send was written: a put's number is counted
  // by every later signal of its sender, so no later signal could be honoured, whereas a send's sequence number and
  // completion slot were taken on both sides at the match, and the receiver gives them up as for a size mismatch
  // (its receive fails, its slot completes, the message id is forgotten). A write that throws handed nothing to the
  // provider (NetTransport::write), so nothing of it lands later: the pair stays in step and goes on. Once a
  // send's earlier pieces left, though, their chunks may still land in the receive's buffer after the receiver
  // heard (the control channel is another connection): only closing the pair's endpoints stops them, so the pair
  // fails, here first (our writes to the peer are dropped), then at the peer, told why. A collective's send (tag < 0)
  // fails the pair too: the receiver's stream would go on with what its scratch or buffer held (an allreduce reduces
  // it and sends the result on), and this rank's own call, whose receives all arrived, would not know (found by
  // review): failing the pair makes every later wait on it, and this call's end check, report it on both sides.
  RequestState& send = *request;
  const bool collective = send.tag < 0;
  std::exception_ptr error;
  std::string reason;
  try {
    rethrow_with_prefix(cause, cat(describe(send.ctx), " (tag ", send.tag, ")"));
  } catch (const Error& e) {
    error = std::current_exception();
    reason = without_head(e.what());  // the receiver wraps it in an error of its own
  }
  if (reason.size() > 1024) reason.resize(1024);
  const bool pair_fails = partly_written || collective;
  // Streams waiting for the send go on, as when the pair fails; the Request is where its failure shows.
  auto fail_send_locked = [&] {
    send.error = error;
    send.failed_alone = true;
    signals->advance_sent(peer, comm::kPeerSignalSlots + send.slot, send.generation);
  };
  {
    std::lock_guard lock(mutex);
    // The pair failed first: that failed the send and released its word, and the peer knows, or its channel is gone.
    if (send.error) return;
    if (!pair_fails) {
      fail_send_locked();
    } else {
      // The pair fails first (below), so that whoever hears of this send's failure finds the pair failed too: a call
      // to the peer made once the send's wait threw is refused. The send leaves the pair's sends in flight, which
      // the pair's failure fails with its own reason, so that it keeps its own error.
      auto& in_flight = peers[peer].sends_in_flight;
      const auto found = in_flight.find(send.slot);
      if (found != in_flight.end() && found->second == request) in_flight.erase(found);
    }
  }
  if (pair_fails) {
    // Whatever happens in fail_peer, the send leaves with its error and its word moved: it is no longer among the
    // pair's sends in flight, so nothing else would release a stream waiting for it. (Failing the pair takes until
    // the transport has closed the pair's endpoints, at most PICKLE_TIMEOUT; the send's error comes after.)
    try {
      fail_peer(peer, reason);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!send.error) fail_send_locked();
      throw;
    }
    std::lock_guard lock(mutex);
    if (!send.error) fail_send_locked();
  }
  using Failure = SendFailedMessage::Failure;
  const Failure failure = partly_written ? Failure::PartlyWritten
                          : collective   ? Failure::CollectiveNotWritten
                                         : Failure::NotWritten;
  try {
    send_control(peer, SendFailedMessage{.tag = send.tag, .seq = send.seq, .send_bytes = send.ctx.bytes,
                                         .reason = reason, .failure = failure});
  } catch (const Error& e) {
    // The channel is broken: the peer sees it close and fails the pair by itself.
    PICKLE_LOG(Debug, "comm", describe(send.ctx) << ": the peer could not be told that the send failed: " << e.what());
  }
}

std::pair<std::uint64_t, std::uint64_t> Communicator::Impl::prepare_net_recv(RequestState& recv) {
  if (!stage_net) {
    const transport::net::RemoteRegion region = net->expose(recv.dst, recv.ctx.bytes);
    return {region.addr, region.key};
  }
  // Staged: the data lands in a pinned buffer of the pool, exposed instead of the destination.
  recv.staging = staging->take(recv.ctx.bytes);
  const transport::net::RemoteRegion region = net->expose(recv.staging.get(), recv.ctx.bytes);
  return {region.addr, region.key};
}

void Communicator::Impl::expect_net_recv(int peer, RequestState& recv) {
  const int slot = recv.slot;
  const std::uint32_t generation = recv.generation;
  const int index = comm::kPeerSignalSlots + slot;
  const std::size_t bytes = recv.ctx.bytes;
  const std::size_t pieces = comm::net_piece_count(bytes);
  transport::net::NetTransport* transport = net.get();  // outlives its callbacks
  // Run as each piece lands (on a transport thread, no lock held); true for the last one. The first piece to land
  // makes the others owed: the sender has begun, and its silence from then on fails the pair after PICKLE_TIMEOUT, as
  // a message some of whose chunks landed would (each piece is a message of its own to the transport).
  auto unlanded = std::make_shared<std::atomic<std::size_t>>(pieces);
  auto one_landed = [transport, peer, slot, generation, pieces, unlanded] {
    const std::size_t before = unlanded->fetch_sub(1);
    if (before == pieces && pieces > 1) {
      for (std::size_t i = 0; i < pieces; ++i) transport->owe(peer, net_recv_message(slot, generation, i));
    }
    return before == 1;
  };
  if (!stage_net) {
    // The data lands in place: the receive completes when the last of its pieces did.
    for (std::size_t i = 0; i < pieces; ++i) {
      const comm::NetPiece part = comm::net_piece(bytes, i);
      net->expect(
          peer, net_recv_message(slot, generation, i), part.length,
          [this, peer, index, generation, one_landed] {
            if (one_landed()) signals->store(peer, index, generation);  // the data is all here
          },
          static_cast<std::byte*>(recv.dst) + part.offset);
    }
    return;
  }
  // Staged: as each piece lands in the staging buffer, the copy engine copies it into place on the staging stream;
  // after the last piece's copy (whichever piece landed last: the stream runs the copies in the order queued), the
  // stream moves the completion word (the caller's streams may wait on it). The transport's thread only hands the
  // piece to the staging enqueuer (copy_staged_piece), which may block on a full stream where a rail must not.
  for (std::size_t i = 0; i < pieces; ++i) {
    const comm::NetPiece part = comm::net_piece(bytes, i);
    const StagedPiece piece{peer,  slot, generation, recv.staging.get() + part.offset,
                            static_cast<std::byte*>(recv.dst) + part.offset, part.length, pieces};
    net->expect(
        peer, net_recv_message(slot, generation, i), part.length,
        [this, piece, one_landed] {
          one_landed();
          staging_enqueuer->post([this, piece] { copy_staged_piece(piece); });
        },
        piece.landed);
  }
}

void Communicator::Impl::handle_net(int peer, const NetPutMessage& m) {
  std::shared_ptr<WindowState> window;
  {
    std::lock_guard lock(mutex);
    for (const auto& candidate : windows) {
      if (candidate->id == m.window) window = candidate;
    }
  }
  const std::size_t window_bytes = window ? window->ranks[static_cast<std::size_t>(info.rank)].bytes : 0;
  if (!window || m.offset > window_bytes || m.bytes > window_bytes - m.offset) {
    throw ProtocolError(cat("rank ", info.rank, ": peer ", peer, " put ", m.bytes, " bytes at offset ", m.offset,
                            " into window ", m.window, ", which is not that large here"));
  }
  const std::uint32_t sequence = m.message & 0x7fffffffu;
  {
    std::lock_guard lock(mutex);
    // A pair that failed (the sender may have announced this put before it heard): nothing of it will land.
    if (peers[peer].failed) return;
    peers[peer].net_puts_announced[sequence] = m.bytes;
  }
  auto landed = [this, peer, sequence] {
    std::lock_guard lock(mutex);
    peers[peer].net_puts_landed.land(sequence);
    peers[peer].net_puts_announced.erase(sequence);
    release_net_signals(peer);
  };
  if (!window->staging) {
    net->expect(peer, m.message, m.bytes, landed);
    return;
  }
  // Staged window: copy the put into place first; it counts as landed (for the signals after it) once copied.
  // Queued by the staging enqueuer: a transport thread blocked on a full stream would hold up fail_peer's release of
  // the pair, which the host callbacks the stream waits for may be running.
  net->expect(peer, m.message, m.bytes, [this, window, m, landed] {
    staging_enqueuer->post([this, window, m, landed] {
      staging_stream->copy(static_cast<std::byte*>(window->local) + m.offset, window->staging.get() + m.offset,
                           m.bytes);
      staging_stream->host_callback(landed);
    });
  });
}

void Communicator::Impl::handle_net(int peer, const NetPutFailedMessage& m) {
  if (!uses_net(peer)) {
    throw ProtocolError(cat("rank ", info.rank, ": peer ", peer, " failed a net put but uses another transport"));
  }
  fail_peer(peer,
            cat("peer ", peer, " failed its put #", m.message & 0x7fffffffu, " of ", m.bytes, " bytes: ", m.reason));
}

void Communicator::Impl::handle_net(int peer, const NetEmptySendMessage& m) {
  if (!uses_net(peer) || m.slot >= static_cast<std::uint32_t>(comm::kCompletionSlots)) {
    throw ProtocolError(cat("rank ", info.rank, ": peer ", peer, " completed a zero-byte net recv in slot ", m.slot));
  }
  signals->store(peer, comm::kPeerSignalSlots + static_cast<int>(m.slot), m.generation);
}

void Communicator::Impl::handle_net(int peer, const NetSignalMessage& m) {
  if (m.slot >= static_cast<std::uint32_t>(comm::kPeerSignalSlots)) {
    throw ProtocolError(cat("rank ", info.rank, ": peer ", peer, " sent a net signal for slot ", m.slot));
  }
  std::lock_guard lock(mutex);
  peers[peer].net_signals_waiting.push_back(m);
  release_net_signals(peer);
}

void Communicator::Impl::release_net_signals(int peer) {
  PeerState& state = peers[peer];
  std::erase_if(state.net_signals_waiting, [&](const NetSignalMessage& m) {
    if (m.puts_before > state.net_puts_landed.count()) return false;
    const int slot = static_cast<int>(m.slot);
    // Signals sent from different streams may arrive out of order: the word only moves forward.
    if (static_cast<std::int32_t>(m.value - signals->load(peer, slot)) > 0) signals->store(peer, slot, m.value);
    return true;
  });
}

void Communicator::Impl::net_put(device::Stream& stream, const WindowState& window, int peer, std::size_t dst_offset,
                                 const void* src, std::size_t bytes) {
  const auto& entry = window.ranks[static_cast<std::size_t>(peer)];
  const transport::net::RemoteRegion dst{entry.net_addr + dst_offset, entry.net_key};
  const int window_id = window.id;
  transport::net::NetTransport* transport = net.get();
  // Staged: the source goes through a pinned buffer, copied on the caller's stream before the write.
  std::shared_ptr<std::byte> staged;
  if (stage_net) {
    staged = staging->take(bytes);
    stream.copy(staged.get(), src, bytes);
    src = staged.get();
  }
  const OpContext ctx{.rank = info.rank, .peer = peer, .op = "put", .bytes = bytes};
  // The put takes its number, and is announced, when the stream gets here, not at call time: a signal counts the
  // puts numbered before it, and must not count one that its own stream never waits for (a put on another stream,
  // held up by a wait on the peer that waits for this signal, would hold it back forever). The stream goes on once
  // the source has been read (it may then be reused), as after an ipc put's copy.
  on_application_stream(stream, [this, transport, peer, src, bytes, dst, window_id, dst_offset, ctx, staged] {
    std::uint32_t message;
    {
      std::lock_guard lock(mutex);
      // A pair that failed meanwhile (an earlier put of this stream, say) gets nothing numbered or announced.
      check_peer_alive_locked(peer, ctx);
      message = 0x80000000u | static_cast<std::uint32_t>(peers[peer].net_puts_sent++ & 0x7fffffffu);
    }
    try {
      send_control(peer, NetPutMessage{.message = message, .window = window_id, .offset = dst_offset, .bytes = bytes});
      write_net_put(*transport, peer, src, dst, message, ctx);
    } catch (const Error& e) {
      fail_net_put(peer, message, ctx, e);
    }
  });
}

void Communicator::Impl::write_net_put(transport::net::NetTransport& transport, int peer, const void* src,
                                       transport::net::RemoteRegion dst, std::uint32_t message, const OpContext& ctx) {
  auto sent = std::make_shared<std::atomic<bool>>(false);
  transport.write(peer, src, ctx.bytes, dst, message, [sent] { sent->store(true, std::memory_order_release); });
  bool done = poll_until(Deadline::after_seconds(timeout_seconds), [&] {
    if (sent->load(std::memory_order_acquire)) return true;
    check_peer_alive(peer, ctx);
    return false;
  });
  if (!done) throw TimeoutError(cat(describe(ctx), ": the net transport did not send within ", timeout_seconds, " s"));
}

void Communicator::Impl::fail_net_put(int peer, std::uint32_t message, const OpContext& ctx, const Error& cause) {
  // The put was numbered and announced: the peer expects its data, and every later signal of this rank counts it, so
  // no signal of ours could be honoured again. As for a receive posted halfway, the pair fails, here first (our
  // writes to the peer are dropped, so none lands after the peer heard of the failure), then at the peer, told why,
  // whose waits for our signals then fail instead of waiting for data that will never come.
  std::string reason = without_head(cause.what());
  if (reason.rfind(describe(ctx), 0) != 0) reason = cat(describe(ctx), ": ", reason);
  if (reason.size() > 1024) reason.resize(1024);
  fail_peer(peer, reason);
  try {
    send_control(peer, NetPutFailedMessage{.message = message, .bytes = ctx.bytes, .reason = reason});
  } catch (const Error& e) {
    // The channel is broken: the peer sees it close and fails the pair by itself.
    PICKLE_LOG(Debug, "comm", describe(ctx) << ": the peer could not be told that the put failed: " << e.what());
  }
  rethrow_with_prefix(cause, describe(ctx));  // the stream's next synchronize reports it
}

void Communicator::Impl::net_signal(device::Stream& stream, int peer, int slot, std::uint32_t value) {
  // Sent when the stream gets here, counting the puts numbered by then: this stream's earlier puts (each put's
  // callback has sent it by the time the next callback runs), and other streams' puts already under way, which
  // land without waiting for anything. Puts that other streams have not reached yet are not waited for.
  on_application_stream(stream, [this, peer, slot, value] { send_net_signal(peer, slot, value); });
}

void Communicator::Impl::send_net_signal(int peer, int slot, std::uint32_t value) {
  NetSignalMessage message{.slot = static_cast<std::uint32_t>(slot), .value = value, .puts_before = 0};
  {
    std::lock_guard lock(mutex);
    // After a put of this stream failed (or the pair did), the signal would claim data that never came.
    check_peer_alive_locked(peer, {.rank = info.rank, .peer = peer, .op = "signal"});
    message.puts_before = peers[peer].net_puts_sent;
  }
  send_control(peer, message);
}

#else  // built without libfabric: uses_net() is always false, so none of these is reached

namespace {
[[noreturn]] void no_net() { throw Error(ErrorCode::Internal, "the net transport is not in this build"); }
}  // namespace

Communicator::Impl::MatchedSend Communicator::Impl::claim_net_send(int, const std::shared_ptr<RequestState>&,
                                                                   const RecvPostMessage&, device::Stream&) {
  no_net();
}
void Communicator::Impl::enqueue_net_send(int, const std::shared_ptr<RequestState>&, const RecvPostMessage&,
                                          device::Stream&) {
  no_net();
}
std::pair<std::uint64_t, std::uint64_t> Communicator::Impl::prepare_net_recv(RequestState&) { no_net(); }
void Communicator::Impl::expect_net_recv(int, RequestState&) { no_net(); }
void Communicator::Impl::handle_net(int, const NetPutMessage&) { no_net(); }
void Communicator::Impl::handle_net(int, const NetSignalMessage&) { no_net(); }
void Communicator::Impl::handle_net(int, const NetEmptySendMessage&) { no_net(); }
void Communicator::Impl::handle_net(int, const NetPutFailedMessage&) { no_net(); }
void Communicator::Impl::release_net_signals(int) { no_net(); }
void Communicator::Impl::net_put(device::Stream&, const WindowState&, int, std::size_t, const void*, std::size_t) {
  no_net();
}
void Communicator::Impl::fail_net_send(int, const std::shared_ptr<RequestState>&, const Error&, bool) { no_net(); }
void Communicator::Impl::fail_net_put(int, std::uint32_t, const OpContext&, const Error&) { no_net(); }
void Communicator::Impl::net_signal(device::Stream&, int, int, std::uint32_t) { no_net(); }
void Communicator::Impl::send_net_signal(int, int, std::uint32_t) { no_net(); }

#endif

}  // namespace pickle
