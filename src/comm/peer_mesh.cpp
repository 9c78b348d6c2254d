#include "comm/peer_mesh.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <random>

#include <pickle/error.hpp>

#include "bootstrap/socket.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/wire.hpp"

namespace pickle::comm {
namespace {

// A stranger that connects to our TCP port and says nothing must not hold up the job for the whole timeout.
constexpr int kHelloTimeoutMs = 10'000;
constexpr std::size_t kMaxHelloBytes = 256;

std::vector<std::byte> hello(int rank, const std::string& nonce) {
  PayloadWriter w;
  w.u32(static_cast<std::uint32_t>(rank)).string(nonce);
  return w.take();
}

/// Reads a connector's hello: its rank, or -1 when it is not one of ours (wrong nonce, garbage, silence).
int read_hello(device::FdChannel& channel, const std::string& nonce, const Deadline& deadline) {
  try {
    const Deadline hello_deadline = Deadline::after_seconds(std::min(kHelloTimeoutMs, std::max(1, deadline.remaining_ms())) / 1000.0);
    auto message = channel.recv(hello_deadline, kMaxHelloBytes);
    PayloadReader reader("control hello", message.bytes);
    const auto rank = static_cast<int>(reader.u32("rank"));
    const std::string theirs = reader.string("nonce", kMaxHelloBytes);
    reader.expect_end();
    return theirs == nonce ? rank : -1;
  } catch (const Error&) {
    return -1;
  }
}

/// Accepts one TCP connection before the deadline.
UniqueFd accept_tcp(int listener, const RankInfo& self, const Deadline& deadline) {
  while (true) {
    pollfd entry{.fd = listener, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&entry, 1, std::max(1, deadline.remaining_ms()));
    if (ready < 0 && errno != EINTR) throw SystemError(cat("rank ", self.rank, ": poll on the control listener"), errno);
    if (ready > 0) {
      UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (fd) {
        bootstrap::configure_tcp_socket(fd.get());
        return fd;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        throw SystemError(cat("rank ", self.rank, ": accept on the control listener"), errno);
      }
    }
    if (deadline.expired()) {
      throw TimeoutError(cat("rank ", self.rank, ": a peer on another host never connected its control channel within ",
                             static_cast<double>(deadline.timeout().count()) / 1000.0, " s"));
    }
  }
}

}  // namespace

std::vector<std::optional<device::FdChannel>> connect_peer_mesh(Store& store, const std::string& key_prefix,
                                                               const RankInfo& self, const std::vector<bool>& same_host,
                                                               const std::function<void(const std::string&)>& barrier,
                                                               const Deadline& deadline) {
  const int world = self.world_size, rank = self.rank;
  // A fresh nonce per communicator: two communicators of one job, or two jobs on one host, never share names. Over
  // TCP it is also the password: a connection that does not present it is not one of our ranks.
  if (rank == 0) {
    std::random_device random;
    store.set(key_prefix + "nonce", cat(random(), random(), random(), random()));
  }
  const std::string nonce = store.get_string(key_prefix + "nonce");
  const std::string prefix = cat("pickle-", nonce, "-");
  int local_higher = 0, remote_higher = 0;
  for (int peer = rank + 1; peer < world; ++peer) (same_host[peer] ? local_higher : remote_higher) += 1;
  const bool any_remote = std::find(same_host.begin(), same_host.end(), false) != same_host.end();

  std::optional<device::FdListener> local_listener;
  if (local_higher > 0) local_listener.emplace(prefix + std::to_string(rank));
  // Ranks on other hosts reach us over TCP, on the interface that routes to the store (as NCCL's bootstrap does).
  bootstrap::Listener tcp_listener;
  if (any_remote) {
    std::string address = bootstrap::local_address_towards(self.master_addr, self.master_port);
    // On the store's own host the route towards it is loopback, which the ranks of other hosts cannot dial.
    if (bootstrap::is_loopback_address(address)) address = bootstrap::non_loopback_address_like(address);
    tcp_listener = bootstrap::listen_tcp(address, 0);
    store.set(cat(key_prefix, "control/", rank), cat(address, " ", tcp_listener.port));
  }
  barrier(key_prefix + "listening");

  std::vector<std::optional<device::FdChannel>> channels(world);
  for (int peer = 0; peer < rank; ++peer) {
    std::optional<device::FdChannel> channel;
    if (same_host[peer]) {
      channel.emplace(device::FdChannel::connect(prefix + std::to_string(peer), deadline));
    } else {
      const std::string card = store.get_string(cat(key_prefix, "control/", peer));
      const auto space = card.find(' ');
      const std::string host = card.substr(0, space);
      const int port = std::stoi(card.substr(space + 1));
      std::string last_error;
      UniqueFd fd = bootstrap::connect_tcp(host, port, deadline, last_error);
      if (!fd) {
        throw TimeoutError(cat("rank ", rank, " -> peer ", peer, ": control channel to ", host, ":", port,
                               " not connected within the timeout: ", last_error));
      }
      channel.emplace(std::move(fd), cat("tcp ", host, ":", port));
    }
    channel->set_peer(peer);
    channel->send(hello(rank, nonce), deadline);
    channels[peer] = std::move(*channel);
  }
  auto adopt = [&](device::FdChannel channel, bool over_tcp) {
    const int peer = read_hello(channel, nonce, deadline);
    if (peer <= rank || peer >= world || channels[peer] || same_host[peer] == over_tcp) {
      if (over_tcp) {
        PICKLE_LOG(Warn, "comm", "rank " << rank << ": dropped a control connection that is not one of this job's ranks");
        return false;
      }
      throw ProtocolError(cat("rank ", rank, ": control channel hello from unexpected rank ", peer));
    }
    channel.set_peer(peer);
    channels[peer] = std::move(channel);
    return true;
  };
  for (int accepted = 0; accepted < local_higher; ++accepted) adopt(local_listener->accept(deadline), false);
  for (int accepted = 0; accepted < remote_higher;) {
    UniqueFd fd = accept_tcp(tcp_listener.fd.get(), self, deadline);
    if (adopt(device::FdChannel(std::move(fd), "tcp control"), true)) ++accepted;
  }
  return channels;
}

}  // namespace pickle::comm
