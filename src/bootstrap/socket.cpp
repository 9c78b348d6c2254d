#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle::bootstrap {
namespace {

/// getaddrinfo results, freed on destruction.
struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) freeaddrinfo(list);
  }
};

/// Resolves host:port; an empty result with the resolver's message in `error` on failure.
bool resolve(const std::string& host, int port, bool passive, AddrInfo& out, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.list);
  if (rc != 0) {
    error = cat("cannot resolve '", host, "': ", gai_strerror(rc));
    return false;
  }
  return true;
}

int port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

std::string format_host(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, host, sizeof host);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, host, sizeof host);
  }
  return host;
}

std::string format_address(const sockaddr_storage& addr) { return cat(format_host(addr), ":", port_of(addr)); }

/// Waits for the events on fd until the deadline: true when ready, false when the deadline passed.
bool poll_one(int fd, short events, const Deadline& deadline) {
  while (true) {
    if (deadline.expired()) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, std::max(1, deadline.remaining_ms()));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) throw SystemError("poll on a store socket", errno);
  }
}

/// One connection attempt to one address; an invalid UniqueFd with the reason in `error` on failure.
UniqueFd try_connect(const addrinfo& ai, const Deadline& deadline, std::string& error) {
  UniqueFd fd(::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd.valid()) {
    error = cat("socket: ", std::strerror(errno));
    return {};
  }
  if (::connect(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = std::strerror(errno);
      return {};
    }
    if (!poll_one(fd.get(), POLLOUT, deadline)) {
      // Keep what an earlier attempt said ("Connection refused"): it explains more than the deadline does.
      if (error.empty()) error = "connect timed out";
      return {};
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      error = std::strerror(so_error);
      return {};
    }
  }
  // With nobody listening on a port of the ephemeral range, Linux can connect a socket to itself (TCP simultaneous
  // open) when the kernel picks that very port as the source port. Such a "store" would never answer.
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof local, remote_len = sizeof remote;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
      getpeername(fd.get(), reinterpret_cast<sockaddr*>(&remote), &remote_len) == 0 && local_len == remote_len &&
      std::memcmp(&local, &remote, local_len) == 0) {
    error = "connected to itself (no listener yet)";
    return {};
  }
  configure_tcp_socket(fd.get());
  return fd;
}

}  // namespace

int unacknowledged_limit_seconds() {
  constexpr int kAtLeast = kKeepaliveIdleSeconds + kKeepaliveProbes * kKeepaliveIntervalSeconds;
  double timeout = 60;
  try {
    timeout = env::timeout_seconds();
  } catch (const Error&) {
    // A bad PICKLE_TIMEOUT is reported by whoever waits; the socket keeps the default.
  }
  return static_cast<int>(std::clamp(std::ceil(timeout), static_cast<double>(kAtLeast), 2e6));
}

void configure_tcp_socket(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw SystemError("fcntl O_NONBLOCK", errno);
  // Each fails harmlessly (ENOTSUP/EOPNOTSUPP) on non-TCP sockets.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepaliveIdleSeconds, sizeof kKeepaliveIdleSeconds);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepaliveIntervalSeconds, sizeof kKeepaliveIntervalSeconds);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepaliveProbes, sizeof kKeepaliveProbes);
  const unsigned int unacknowledged_ms = static_cast<unsigned int>(unacknowledged_limit_seconds()) * 1000u;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &unacknowledged_ms, sizeof unacknowledged_ms);
}

namespace {

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

/// Binds `fd` to the wildcard address of `family` at `port`; returns bind()'s result.
int bind_wildcard(int fd, int family, int port) {
  sockaddr_storage any{};
  socklen_t length = 0;
  if (family == AF_INET6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(any);
    in6.sin6_family = AF_INET6;
    in6.sin6_addr = in6addr_any;
    in6.sin6_port = htons(static_cast<std::uint16_t>(port));
    length = sizeof(sockaddr_in6);
  } else {
    auto& in4 = reinterpret_cast<sockaddr_in&>(any);
    in4.sin_family = AF_INET;
    in4.sin_addr.s_addr = htonl(INADDR_ANY);
    in4.sin_port = htons(static_cast<std::uint16_t>(port));
    length = sizeof(sockaddr_in);
  }
  return ::bind(fd, reinterpret_cast<sockaddr*>(&any), length);
}

}  // namespace

Listener listen_tcp(const std::string& host, int port, bool other_hosts_connect) {
  AddrInfo ai;
  std::string error;
  if (!resolve(host, port, false, ai, error)) throw InvalidArgument(cat("store address: ", error));
  int last_errno = 0;
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    // Lets the next job bind the same MASTER_PORT while connections of this one linger in TIME_WAIT.
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (other_hosts_connect && is_loopback(a->ai_addr)) {
      // The name resolves to loopback here, to a real address elsewhere: listen where the others can reach us.
      PICKLE_LOG(Info, "bootstrap",
                 host << " resolves to a loopback address on this host, and ranks of other hosts will connect: "
                         "listening on every interface");
      rc = bind_wildcard(fd.get(), a->ai_family, port);
    } else {
      rc = ::bind(fd.get(), a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EADDRNOTAVAIL) {
        // MASTER_ADDR names this host by an address it does not own (NAT, alias): listen on every interface.
        PICKLE_LOG(Warn, "bootstrap",
                   host << " is not an address of this host; the store listens on every interface instead");
        rc = bind_wildcard(fd.get(), a->ai_family, port);
      }
    }
    if (rc != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last_errno = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    return Listener{std::move(fd), port_of(bound)};
  }
  throw SystemError(cat("rank 0: cannot listen on ", host, ":", port,
                        " for the store (MASTER_PORT taken by another process?)"),
                    last_errno);
}

UniqueFd connect_tcp(const std::string& host, int port, const Deadline& deadline, std::string& last_error) {
  auto backoff = std::chrono::milliseconds(10);
  while (!deadline.expired()) {
    AddrInfo ai;
    if (resolve(host, port, false, ai, last_error)) {
      for (addrinfo* a = ai.list; a != nullptr && !deadline.expired(); a = a->ai_next) {
        UniqueFd fd = try_connect(*a, deadline, last_error);
        if (fd.valid()) return fd;
      }
    }
    auto left = std::chrono::milliseconds(deadline.remaining_ms());
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  if (last_error.empty()) last_error = "no attempt finished in time";
  return {};
}

IoStatus send_all(int fd, std::span<const std::byte> bytes, const Deadline& deadline, const std::string& what) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!poll_one(fd, POLLOUT, deadline)) return IoStatus::TimedOut;
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return IoStatus::Closed;
    throw SystemError(cat(what, ": send"), errno);
  }
  return IoStatus::Done;
}

IoStatus recv_some(int fd, std::span<std::byte> buffer, std::size_t& received, const Deadline& deadline,
                   const std::string& what) {
  received = 0;
  while (true) {
    ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n > 0) {
      received = static_cast<std::size_t>(n);
      return IoStatus::Done;
    }
    if (n == 0) return IoStatus::Closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!poll_one(fd, POLLIN, deadline)) return IoStatus::TimedOut;
      continue;
    }
    if (errno == ECONNRESET) return IoStatus::Closed;
    throw SystemError(cat(what, ": recv"), errno);
  }
}

std::string local_address_towards(const std::string& host, int port) {
  AddrInfo found;
  std::string error;
  if (!resolve(host, port, false, found, error)) throw InvalidArgument(error);
  // connect() on a UDP socket only picks the route and source address: nothing goes on the wire.
  UniqueFd fd(::socket(found.list->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) throw SystemError(cat("a socket to find the route to ", host), errno);
  if (::connect(fd.get(), found.list->ai_addr, found.list->ai_addrlen) != 0) {
    throw SystemError(cat("no route to ", host, ":", port), errno);
  }
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    throw SystemError(cat("the local address towards ", host), errno);
  }
  return format_host(local);
}

bool is_loopback_address(const std::string& address) {
  sockaddr_storage parsed{};
  if (inet_pton(AF_INET, address.c_str(), &reinterpret_cast<sockaddr_in&>(parsed).sin_addr) == 1) {
    parsed.ss_family = AF_INET;
  } else if (inet_pton(AF_INET6, address.c_str(), &reinterpret_cast<sockaddr_in6&>(parsed).sin6_addr) == 1) {
    parsed.ss_family = AF_INET6;
  } else {
    return false;
  }
  return is_loopback(reinterpret_cast<const sockaddr*>(&parsed));
}

std::string non_loopback_address_like(const std::string& address) {
  const int family = address.find(':') != std::string::npos ? AF_INET6 : AF_INET;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw SystemError("getifaddrs", errno);
  std::string found;
  for (ifaddrs* entry = list; entry != nullptr && found.empty(); entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != family) continue;
    if ((entry->ifa_flags & IFF_UP) == 0 || (entry->ifa_flags & IFF_LOOPBACK) != 0 || is_loopback(entry->ifa_addr)) {
      continue;
    }
    if (family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr)->sin6_addr)) {
      continue;  // needs a scope id that the other hosts would not know
    }
    sockaddr_storage copy{};
    std::memcpy(&copy, entry->ifa_addr, family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    found = format_host(copy);
  }
  freeifaddrs(list);
  if (found.empty()) {
    throw SystemError(cat("no network interface of this host has a non-loopback ",
                          family == AF_INET6 ? "IPv6" : "IPv4", " address for ranks of other hosts to reach"),
                      0);
  }
  return found;
}

std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return format_address(addr);
}

}  // namespace pickle::bootstrap
