#pragma once
// TCP sockets for the store: an RAII descriptor, a listener, a connect that retries until a deadline, and
// deadline-bounded send/recv over non-blocking sockets (poll), so that no socket call can hang.

#include <cstddef>
#include <span>
#include <string>

#include "core/clock.hpp"
#include "core/unique_fd.hpp"

namespace pickle::bootstrap {


/// A listening, non-blocking TCP socket bound to host:port (port 0: any free port). The host's own address is
/// tried first; when it is not an address of this machine (EADDRNOTAVAIL), the wildcard address of its family. With
/// `other_hosts_connect`, a loopback address (a hostname that /etc/hosts maps to 127.0.1.1, as Debian does, while
/// other hosts resolve it through DNS) is replaced by the wildcard too: a listener on loopback refuses them all.
struct Listener {
  UniqueFd fd;
  int port = 0;  ///< the port actually bound
};
Listener listen_tcp(const std::string& host, int port, bool other_hosts_connect = false);

/// Connects to host:port, retrying refused or unreachable attempts with a short backoff until the deadline.
/// Returns an invalid UniqueFd when the deadline passes; last_error then says what the last attempt got.
/// The socket is set up by configure_tcp_socket.
UniqueFd connect_tcp(const std::string& host, int port, const Deadline& deadline, std::string& last_error);

/// Keepalive of the store's and the control channels' TCP connections: a peer host that vanishes without a reset
/// (power loss, a partition) is found, and the connection fails (ETIMEDOUT), which fails that peer. Without it nothing
/// that only waits (a posted receive, a stream waiting on a signal) would ever hear of it. Probes start after
/// kKeepaliveIdleSeconds of silence, kKeepaliveIntervalSeconds apart; a live host's kernel answers them however idle
/// or stopped its process is. The connection is given up once the peer's kernel has acknowledged nothing for
/// unacknowledged_limit_seconds() (TCP_USER_TIMEOUT): probes unanswered, data never acknowledged, or a receive window
/// that stays shut (a process stopped in a debugger stops reading). That is PICKLE_TIMEOUT, the limit every wait of
/// pickle has, and at least kKeepaliveIdleSeconds + 3 probes.
inline constexpr int kKeepaliveIdleSeconds = 10;
inline constexpr int kKeepaliveIntervalSeconds = 5;
inline constexpr int kKeepaliveProbes = 3;
int unacknowledged_limit_seconds();

/// Sets O_NONBLOCK and, for TCP sockets, TCP_NODELAY (store messages are small and latency-bound) and the keepalive
/// above.
void configure_tcp_socket(int fd);

/// Outcome of a deadline-bounded socket operation.
enum class IoStatus { Done, Closed, TimedOut };

/// Sends all bytes before the deadline (MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE). Closed: the peer
/// reset the connection. Other failures are SystemError naming `what`.
IoStatus send_all(int fd, std::span<const std::byte> bytes, const Deadline& deadline, const std::string& what);

/// Receives at least one byte into buffer before the deadline; `received` is how many. Closed: end of stream.
IoStatus recv_some(int fd, std::span<std::byte> buffer, std::size_t& received, const Deadline& deadline,
                   const std::string& what);

/// The address of this host's interface that routes towards host:port (what a socket connected there would have as
/// its own address; no packet is sent). SystemError when there is no route, InvalidArgument when `host` does not
/// resolve.
std::string local_address_towards(const std::string& host, int port);

/// An address of this host that other hosts can reach, of the same family as `address` (the first non-loopback
/// address of an interface that is up), for when the route towards the store is loopback (this host is the
/// store's). SystemError when there is none.
std::string non_loopback_address_like(const std::string& address);

/// Whether `address` (a numeric IPv4 or IPv6 address) is a loopback address.
bool is_loopback_address(const std::string& address);

/// "127.0.0.1:51234" for a connected socket's peer ("?" when unknown): for log lines about strangers.
std::string peer_address(int fd);

}  // namespace pickle::bootstrap
