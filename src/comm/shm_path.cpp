// put and signal over the shm transport. Each takes its place in the staging ring when its stream reaches it (a
// host callback), not when it is called: the ring is first in, first out, so a put reserved at call time whose
// stream then waited on the peer held up every later message to that peer, a send the peer needed before it would
// release that stream included (Shm.APutAndSignalHeldByTheirStreamDoNotHoldUpALaterSend). Two-sided sends take
// their places the same way (p2p.cpp, shm_send_step).
#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "core/clock.hpp"
#include "core/format.hpp"
#include "device/host/backoff.hpp"

namespace pickle {

void Communicator::Impl::shm_put(device::Stream& stream, const WindowState& window, int peer, std::size_t dst_offset,
                                 const void* src, std::size_t bytes) {
  const OpContext ctx{.rank = info.rank, .peer = peer, .op = "put", .bytes = bytes};
  // The stream goes on once the source has been read into the ring (it may then be reused), as after an ipc put's
  // copy. Where the put lands in the ring, and so which progress it waits for, is known only once the stream gets
  // to it, so the wait is on a word of its own, which the transport's sending stream writes after the put's last
  // chunk: the puts to a peer take the words kShmPutWordBase + 0, 1, ... in turn, each at one generation more than
  // its previous put. One put at a time takes a word (shm_put_mutex): the generation is read, waited for and
  // advanced in turn.
  std::lock_guard put_lock(shm_put_mutex);
  int slot;
  std::uint32_t previous;
  {
    std::lock_guard lock(mutex);
    // Checked with the word taken: a put that passed put()'s check while the peer failed would otherwise wait on a
    // word that fail_peer did not release, and that no transport stream will write.
    check_peer_alive_locked(peer, ctx);
    PeerState& state = peers[peer];
    slot = static_cast<int>(state.shm_puts++ % comm::kShmPutSlots);
    previous = state.shm_put_generation[static_cast<std::size_t>(slot)];
  }
  const int index = comm::kShmPutWordBase + slot;
  // The word's previous put must have been read first: this put writing the next generation would otherwise release
  // that put's stream early. It was kShmPutSlots puts ago, so this waits only when that many puts to the peer are
  // held up by their streams at once.
  if (previous > 0) {
    const bool free = poll_until(Deadline::after_seconds(timeout_seconds), [&] {
      check_peer_alive(peer, ctx);
      return device::host::flag_reached(signals->load_sent(peer, index), previous);
    });
    if (!free) {
      throw TimeoutError(cat(describe(ctx), ": the put issued ", comm::kShmPutSlots, " puts earlier to this peer has "
                             "not been read within ", timeout_seconds, " s (its stream has not reached it); at most ",
                             comm::kShmPutSlots, " shm puts to one peer may wait for their streams at once"));
    }
  }
  const std::uint32_t generation = previous + 1;
  {
    // Recorded before the put is queued, so that a failure of the peer from here on releases this word too.
    std::lock_guard lock(mutex);
    check_peer_alive_locked(peer, ctx);
    peers[peer].shm_put_generation[static_cast<std::size_t>(slot)] = generation;
    note_stream_on_words_locked(stream);  // it waits on the put's "source read" word below
  }
  std::uint32_t* word = signals->sent_word_for_streams(peer, index);
  const std::int32_t window_id = window.id;
  try {
    on_application_stream(stream, [this, peer, src, bytes, dst_offset, window_id, word, generation] {
      const auto first = shm->send(peer, src, bytes, transport::shm::ShmTransport::StreamWord{word, generation});
      // A failed pair queues nothing: its failure released this put's word (fail_peer_locked).
      if (!first) return;
      post_control(peer,
                   ShmPutMessage{.window = window_id, .offset = dst_offset, .bytes = bytes, .first_chunk = *first});
    });
  } catch (...) {
    // Not queued: the word's next put waits for the previous generation again, not for one that never comes.
    std::lock_guard lock(mutex);
    peers[peer].shm_put_generation[static_cast<std::size_t>(slot)] = previous;
    throw;
  }
  stream.wait_value(word, generation);
}

void Communicator::Impl::shm_signal(device::Stream& stream, int peer, int slot, std::uint32_t value) {
  // A marker in the ring behind the puts to the peer that reached the ring before it (those earlier on this stream
  // included): the peer's receiving stream sets the signal once everything before the marker arrived.
  on_application_stream(stream, [this, peer, slot, value] { send_shm_signal(peer, slot, value); });
}

void Communicator::Impl::send_shm_signal(int peer, int slot, std::uint32_t value) {
  const std::optional<std::uint64_t> first = shm->send(peer, nullptr, 0);
  if (!first) return;  // the pair failed: nothing is signalled any more
  post_control(peer, ShmSignalMessage{.slot = static_cast<std::uint32_t>(slot), .value = value, .first_chunk = *first});
}

}  // namespace pickle
