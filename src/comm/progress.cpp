// The progress thread: reads every control channel, maps announced memory, matches posted receives with waiting
// sends, and turns a peer's disappearance into PeerError on every operation pending with it (and releases stream
// waits on its completion words, so that no stream stays blocked on a peer that will never write).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <pickle/error.hpp>

#include "comm/comm_impl.hpp"
#include "core/log.hpp"
#include "core/overloaded.hpp"
#include "device/descriptor.hpp"
#include "device/host/backoff.hpp"

namespace pickle {

void Communicator::Impl::send_control(int peer, const ControlMessage& message, int fd) {
  std::lock_guard lock(*channel_send_mutex[peer]);
  channels[peer]->send(comm::encode(message), fd, Deadline::after_seconds(timeout_seconds));
}

void Communicator::Impl::progress_loop() {
  std::vector<int> live;  // peers whose channel we still read
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (peer != info.rank) live.push_back(peer);
  }
  std::vector<pollfd> fds;
  while (!stopping.load()) {
    fds.clear();
    fds.push_back({wake.get(), POLLIN, 0});
    for (int peer : live) fds.push_back({channels[peer]->native_handle(), POLLIN, 0});
    int ready = ::poll(fds.data(), fds.size(), 1000);
    if (ready < 0) {
      if (errno == EINTR) continue;
      PICKLE_LOG(Error, "comm", "progress thread: poll failed: " << std::strerror(errno));
      return;
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
        if (!expected) fail_peer(peer, cat("peer ", peer, " failed: ", e.what()));
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
            std::optional<SendFailedMessage> failure;
            {
              std::lock_guard lock(mutex);
              PeerState& state = peers[peer];
              auto& sends = state.pending_sends[post.tag];
              if (sends.empty()) {
                state.pending_posts[post.tag].push_back(post);
              } else {
                auto send = sends.front();
                sends.pop_front();
                failure = start_copy(peer, *send, post, ipc->stream(peer));
              }
            }
            if (failure) send_control(peer, *failure);
          },
          [&](const SendFailedMessage& m) {
            std::lock_guard lock(mutex);
            PeerState& state = peers[peer];
            auto it = state.posted_recvs.find({m.tag, m.seq});
            if (it == state.posted_recvs.end()) return;
            RequestState& request = *it->second;
            request.error = std::make_exception_ptr(InvalidArgument(
                cat(describe(request.ctx), " (tag ", m.tag, "): peer ", peer, "'s send of ", m.send_bytes,
                    " bytes failed: ", m.reason)));
            signals->store(peer, comm::kUserSignalSlots + request.slot, request.generation);  // release stream waits
          },
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

void Communicator::Impl::fail_peer(int peer, const std::string& reason) {
  std::lock_guard lock(mutex);
  PeerState& state = peers[peer];
  state.failed = true;
  state.failure = reason;
  int failed = 0;
  for (auto& [tag, sends] : state.pending_sends) {
    for (auto& send : sends) send->error = std::make_exception_ptr(PeerError(cat(describe(send->ctx), ": ", reason), peer));
    failed += static_cast<int>(sends.size());
    sends.clear();
  }
  state.pending_posts.clear();
  for (auto& [key, request] : state.posted_recvs) {
    if (request->error ||
        device::host::flag_reached(signals->load(peer, comm::kUserSignalSlots + request->slot), request->generation)) {
      continue;  // it completed (or failed) before the peer went away
    }
    request->error = std::make_exception_ptr(PeerError(cat(describe(request->ctx), ": ", reason), peer));
    signals->store(peer, comm::kUserSignalSlots + request->slot, request->generation);  // release stream waits
    ++failed;
  }
  // A peer that closes normally has nothing pending with us: that is worth a debug line, not a warning.
  if (failed > 0) {
    PICKLE_LOG(Warn, "comm", reason << "; " << failed << " pending operation(s) with it failed");
  } else {
    PICKLE_LOG(Debug, "comm", reason);
  }
  // Release stream waits on the peer's user signal slots too: a value 2^31 - 1 ahead satisfies any wait_value the
  // peer could still have been expected to satisfy. Later calls naming the peer fail with PeerError.
  for (int slot = 0; slot < comm::kUserSignalSlots; ++slot) signals->store(peer, slot, signals->load(peer, slot) + 0x7fffffffu);
  // The peer's mappings stay: copies into them may still be queued on streams, and the memory they map stays valid
  // (our import holds it) until the communicator is destroyed.
}

}  // namespace pickle
