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
  std::uint64_t n;
  {
    std::lock_guard lock(mutex);
    n = peers[peer].shm_puts++;
  }
  // The stream goes on once the source has been read into the ring (it may then be reused), as after an ipc put's
  // copy. Where the put lands in the ring, and so which progress it waits for, is known only once the stream gets
  // to it, so the wait is on a word of its own, which the transport's sending stream writes after the put's last
  // chunk: put n uses word n % kShmPutSlots at generation n / kShmPutSlots + 1.
  const int index = comm::kShmPutWordBase + static_cast<int>(n % comm::kShmPutSlots);
  const auto generation = static_cast<std::uint32_t>(n / comm::kShmPutSlots + 1);
  // The word's previous put must be done first: a later put writing the next generation would otherwise release
  // this put's stream early. That is kShmPutSlots puts ago, so this waits only when that many puts to the peer are
  // held up by their streams at once.
  if (generation > 1) {
    const bool free = poll_until(Deadline::after_seconds(timeout_seconds), [&] {
      check_peer_alive(peer, ctx);
      return device::host::flag_reached(signals->load_sent(peer, index), generation - 1);
    });
    if (!free) {
      throw TimeoutError(cat(describe(ctx), ": the put issued ", comm::kShmPutSlots, " puts earlier to this peer has "
                             "not been read within ", timeout_seconds, " s (its stream has not reached it); at most ",
                             comm::kShmPutSlots, " shm puts to one peer may wait for their streams at once"));
    }
  }
  std::uint32_t* word = signals->sent_word_for_streams(peer, index);
  const std::int32_t window_id = window.id;
  on_application_stream(stream, [this, peer, src, bytes, dst_offset, window_id, word, generation] {
    const std::uint64_t first = shm->send(peer, src, bytes, transport::shm::ShmTransport::StreamWord{word, generation});
    post_control(peer, ShmPutMessage{.window = window_id, .offset = dst_offset, .bytes = bytes, .first_chunk = first});
  });
  stream.wait_value(word, generation);
}

void Communicator::Impl::shm_signal(device::Stream& stream, int peer, int slot, std::uint32_t value) {
  // A marker in the ring behind the puts to the peer that reached the ring before it (those earlier on this stream
  // included): the peer's receiving stream sets the signal once everything before the marker arrived.
  on_application_stream(stream, [this, peer, slot, value] {
    const std::uint64_t first = shm->send(peer, nullptr, 0);
    post_control(peer, ShmSignalMessage{.slot = static_cast<std::uint32_t>(slot), .value = value, .first_chunk = first});
  });
}

}  // namespace pickle
