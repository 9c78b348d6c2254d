#include "bootstrap/store_server.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include <pickle/error.hpp>

#include "bootstrap/frame.hpp"
#include "bootstrap/messages.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store_state.hpp"
#include "core/error_text.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle::bootstrap {
namespace {

/// How long an answer that precedes a close may take to drain before the connection is cut anyway.
constexpr auto kLingerOnClose = std::chrono::seconds(1);
/// Longest poll sleep: the loop re-checks its deadlines at least this often.
constexpr int kMaxPollMs = 1000;

struct Connection {
  UniqueFd fd;
  std::string peer;
  FrameParser parser{kMaxHelloPayloadBytes};  // raised to kMaxPayloadBytes once the client is a rank
  std::deque<std::vector<std::byte>> out;
  std::size_t out_offset = 0;  // bytes of out.front() already sent
  bool member = false;
  bool closing = false;  // an answer is queued; close once it is sent (or at close_by)
  bool dead = false;     // close now: end of stream or a socket error
  TimePoint close_by{};
  TimePoint accepted_at{};
};

}  // namespace

struct StoreServer::Impl {
  Impl(Listener l, int world, std::string token, double timeout_seconds)
      : listener(std::move(l)),
        wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        hello_timeout(static_cast<std::int64_t>(timeout_seconds * 1000.0)),
        max_connections(static_cast<std::size_t>(world) * 2 + 64),
        state(world, std::move(token)) {
    if (!wake.valid()) throw SystemError("rank 0: eventfd for the store server", errno);
  }

  void run() noexcept;
  void loop();
  int poll_timeout(TimePoint now) const;
  void accept_all(TimePoint now);
  void read_from(ConnId id, Connection& c, TimePoint now, std::vector<Outgoing>& out);
  void reject(ConnId id, Connection& c, const std::exception& e, std::vector<Outgoing>& out);
  void dispatch(std::vector<Outgoing>& out, TimePoint now);
  void flush(Connection& c);
  void close_finished(TimePoint now);
  void signal_wake() {
    const std::uint64_t one = 1;
    if (::write(wake.get(), &one, sizeof one) < 0) {
      // The counter can only be full if nobody drains it, in which case the loop is awake already.
    }
  }

  Listener listener;
  UniqueFd wake;
  std::chrono::milliseconds hello_timeout;
  std::size_t max_connections;
  StoreState state;
  std::map<ConnId, Connection> conns;
  ConnId next_id = 1;
  std::vector<std::byte> read_buffer = std::vector<std::byte>(256 * 1024);
  std::atomic<bool> stop{false};
  std::atomic<bool> finishing{false};
  std::atomic<Clock::rep> finish_by{0};  // Clock ticks; valid once finishing is set
  std::thread thread;
};

void StoreServer::Impl::run() noexcept {
  try {
    loop();
  } catch (const std::exception& e) {
    // Closing every connection below turns the clients' waits into prompt PeerErrors instead of timeouts.
    PICKLE_LOG(Error, "bootstrap", "store server stopped: " << e.what());
  }
  for (auto& [id, c] : conns) flush(c);  // best effort: answers queued in the last round
  conns.clear();
}

int StoreServer::Impl::poll_timeout(TimePoint now) const {
  TimePoint earliest = now + std::chrono::milliseconds(kMaxPollMs);
  if (auto deadline = state.next_deadline()) earliest = std::min(earliest, *deadline);
  for (const auto& [id, c] : conns) {
    if (c.closing) earliest = std::min(earliest, c.close_by);
    if (!c.member) earliest = std::min(earliest, c.accepted_at + hello_timeout);
  }
  if (finishing.load(std::memory_order_acquire)) {
    earliest = std::min(earliest, TimePoint(Clock::duration(finish_by.load(std::memory_order_acquire))));
  }
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(earliest - now).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 0, kMaxPollMs));
}

void StoreServer::Impl::loop() {
  std::vector<pollfd> fds;
  std::vector<ConnId> ids;
  while (!stop.load(std::memory_order_acquire)) {
    TimePoint now = Clock::now();
    if (finishing.load(std::memory_order_acquire)) {
      if (state.no_rank_connected()) break;
      // A rank that a gather already gave up waiting for (stopped, hung) is not waited for a second time: the job
      // has failed, and the rank, should it ever go on, finds the store closed.
      if (state.only_unresponsive_ranks_connected()) {
        PICKLE_LOG(Info, "bootstrap", "store: rank 0 is shutting down the store without waiting for "
                                          << state.connected_ranks() << ", which a gather gave up waiting for");
        break;
      }
      if (now >= TimePoint(Clock::duration(finish_by.load(std::memory_order_acquire)))) {
        PICKLE_LOG(Warn, "bootstrap",
                   "store: rank 0 is shutting down the store with " << state.connected_ranks() << " still connected");
        break;
      }
    }
    fds.clear();
    ids.clear();
    fds.push_back(pollfd{wake.get(), POLLIN, 0});
    fds.push_back(pollfd{listener.fd.get(), POLLIN, 0});
    for (const auto& [id, c] : conns) {
      short events = 0;
      if (!c.closing) events |= POLLIN;
      if (!c.out.empty()) events |= POLLOUT;
      fds.push_back(pollfd{c.fd.get(), events, 0});
      ids.push_back(id);
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout(now));
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw SystemError("store server poll", errno);
    }
    now = Clock::now();
    std::vector<Outgoing> out;
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      if (::read(wake.get(), &count, sizeof count) < 0) {
        // EAGAIN: another wake-up already drained it.
      }
    }
    if ((fds[1].revents & POLLIN) != 0) accept_all(now);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const short revents = fds[i + 2].revents;
      auto it = conns.find(ids[i]);
      if (revents == 0 || it == conns.end()) continue;
      Connection& c = it->second;
      if ((revents & POLLOUT) != 0) flush(c);
      if (c.closing) {
        if ((revents & (POLLHUP | POLLERR)) != 0) c.dead = true;
      } else if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        read_from(ids[i], c, now, out);
      }
      dispatch(out, now);
    }
    state.on_tick(now, out);
    dispatch(out, now);
    close_finished(now);
  }
}

void StoreServer::Impl::accept_all(TimePoint now) {
  while (true) {
    int raw = ::accept4(listener.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors: back off instead of spinning on a listener that stays readable.
      PICKLE_LOG(Warn, "bootstrap", "store: accept failed: " << std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    UniqueFd fd(raw);
    // Only connections that have not said Hello or Attach count: the ranks' own are bounded by the state (one per
    // rank, plus StoreState::kMaxAttachedPerRank), strangers by this.
    const auto strangers = static_cast<std::size_t>(
        std::count_if(conns.begin(), conns.end(), [](const auto& entry) { return !entry.second.member; }));
    if (strangers >= max_connections) {
      PICKLE_LOG(Warn, "bootstrap",
                 "store: refusing a connection from " << peer_address(raw) << ": " << strangers
                                                      << " connections that are not ranks yet already open");
      continue;
    }
    configure_tcp_socket(raw);
    Connection c;
    c.peer = peer_address(raw);
    c.fd = std::move(fd);
    c.accepted_at = now;
    PICKLE_LOG(Debug, "bootstrap", "store: connection from " << c.peer);
    conns.emplace(next_id++, std::move(c));
  }
}

void StoreServer::Impl::read_from(ConnId id, Connection& c, TimePoint now, std::vector<Outgoing>& out) {
  // A bounded number of reads per round, so that one busy client cannot starve the others.
  for (int round = 0; round < 16; ++round) {
    ssize_t n = ::recv(c.fd.get(), read_buffer.data(), read_buffer.size(), MSG_DONTWAIT);
    if (n == 0) {
      c.dead = true;
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
      return;
    }
    c.parser.feed({read_buffer.data(), static_cast<std::size_t>(n)});
    try {
      while (auto frame = c.parser.next()) {
        state.on_frame(id, *frame, now, c.peer, out);
        if (!c.member && state.is_member(id)) {
          c.member = true;
          c.parser.set_max_payload(kMaxPayloadBytes);
        }
        // A refused Hello: stop reading; the refusal is sent, then the connection closed.
        if (!out.empty() && out.back().conn == id && out.back().close_after) {
          c.closing = true;
          return;
        }
      }
    } catch (const std::exception& e) {
      reject(id, c, e, out);
      return;
    }
  }
}

void StoreServer::Impl::reject(ConnId id, Connection& c, const std::exception& e, std::vector<Outgoing>& out) {
  const std::string message = without_head(e.what());  // the wire carries the message without its head
  PICKLE_LOG(Warn, "bootstrap",
             "store: dropping the connection from " << c.peer << (c.member ? "" : " (not a rank)") << ": " << message);
  c.closing = true;
  out.push_back(Outgoing{id, encode(ErrorResponse{static_cast<std::uint32_t>(ErrorCode::Protocol), -1, message}), true});
}

void StoreServer::Impl::dispatch(std::vector<Outgoing>& out, TimePoint now) {
  for (auto& o : out) {
    auto it = conns.find(o.conn);
    if (it == conns.end() || it->second.dead) continue;
    Connection& c = it->second;
    c.out.push_back(std::move(o.bytes));
    if (o.close_after) {
      c.closing = true;
      c.close_by = now + kLingerOnClose;
    }
    flush(c);
  }
  out.clear();
}

void StoreServer::Impl::flush(Connection& c) {
  while (!c.out.empty() && !c.dead) {
    const auto& front = c.out.front();
    ssize_t n = ::send(c.fd.get(), front.data() + c.out_offset, front.size() - c.out_offset, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      c.dead = true;  // the peer is gone; what it does not read no longer matters
      c.out.clear();
      return;
    }
    c.out_offset += static_cast<std::size_t>(n);
    if (c.out_offset == front.size()) {
      c.out.pop_front();
      c.out_offset = 0;
    }
  }
}

void StoreServer::Impl::close_finished(TimePoint now) {
  // Closing one connection can fail waits on others (a lost rank), which can close nothing further but may queue
  // answers: loop until a round closes nothing.
  while (true) {
    std::vector<ConnId> closing;
    for (auto& [id, c] : conns) {
      const bool sent = c.closing && c.out.empty();
      const bool lingered = c.closing && now >= c.close_by;
      const bool silent = !c.member && !c.closing && now >= c.accepted_at + hello_timeout;
      if (silent) PICKLE_LOG(Info, "bootstrap", "store: dropping " << c.peer << ": no Hello in time");
      if (c.dead || sent || lingered || silent) closing.push_back(id);
    }
    if (closing.empty()) return;
    std::vector<Outgoing> out;
    for (ConnId id : closing) {
      conns.erase(id);
      state.on_disconnect(id, out);
    }
    dispatch(out, now);
  }
}

StoreServer::StoreServer(const std::string& host, int port, int world_size, std::string token, double timeout_seconds,
                         bool other_hosts_connect)
    : impl_(std::make_unique<Impl>(listen_tcp(host, port, other_hosts_connect), world_size, std::move(token),
                                   timeout_seconds)) {
  PICKLE_LOG(Info, "bootstrap", "store: rank 0 serves " << world_size << " ranks on " << host << ":" << impl_->listener.port);
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

StoreServer::~StoreServer() {
  impl_->stop.store(true, std::memory_order_release);
  impl_->signal_wake();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int StoreServer::port() const { return impl_->listener.port; }

void StoreServer::finish(const Deadline& deadline) {
  const auto end = Clock::now() + std::chrono::milliseconds(deadline.remaining_ms());
  impl_->finish_by.store(end.time_since_epoch().count(), std::memory_order_release);
  impl_->finishing.store(true, std::memory_order_release);
  impl_->signal_wake();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace pickle::bootstrap
