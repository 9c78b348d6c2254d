#pragma once
// Passing file descriptors (memfds, VMM POSIX handles) between processes on one host: Unix stream sockets in the
// abstract namespace (no file to clean up, gone when the listener closes), framed messages with a length check,
// and at most one descriptor per message (SCM_RIGHTS). Every wait is bounded by a Deadline.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/unique_fd.hpp"

namespace pickle::device {

/// Largest payload a channel accepts; bigger announced lengths are a ProtocolError, never an allocation.
inline constexpr std::size_t kFdChannelMaxMessage = 1 << 20;

/// A message and the descriptor that came with it (invalid when none did).
struct FdMessage {
  std::vector<std::byte> bytes;
  UniqueFd fd;
};

/// One connected end. Messages keep their boundaries; each carries at most one fd.
class FdChannel {
 public:
  /// Connects to the listener called `name`, retrying while it does not exist yet, until `deadline`.
  static FdChannel connect(const std::string& name, const Deadline& deadline);

  /// Wraps a connected, non-blocking stream socket: a Unix socket, or TCP to another host.
  explicit FdChannel(UniqueFd socket, std::string name);
  FdChannel(FdChannel&&) noexcept = default;
  FdChannel& operator=(FdChannel&&) noexcept = default;

  /// Names the peer's rank in error messages (PeerError carries it).
  void set_peer(int peer) { peer_ = peer; }

  /// Sends `bytes` (at most kFdChannelMaxMessage) and, when fd >= 0, a duplicate of `fd` (the caller keeps its own;
  /// Unix sockets only: over TCP a descriptor is an InvalidArgument).
  void send(std::span<const std::byte> bytes, int fd, const Deadline& deadline);
  void send(std::span<const std::byte> bytes, const Deadline& deadline) { send(bytes, -1, deadline); }
  /// Receives one message. A closed peer is a PeerError, a length over `max_bytes` or more than one fd a
  /// ProtocolError, the deadline a TimeoutError.
  FdMessage recv(const Deadline& deadline, std::size_t max_bytes = kFdChannelMaxMessage);

  int native_handle() const { return socket_.get(); }

 private:
  std::string what(std::string_view op, std::size_t bytes) const;
  void wait_ready(short events, const Deadline& deadline, std::string_view op, std::size_t bytes);
  void read_exact(std::byte* out, std::size_t bytes, std::vector<UniqueFd>& fds, const Deadline& deadline,
                  std::size_t message_bytes);

  UniqueFd socket_;
  std::string name_;
  int peer_ = -1;
  bool passes_fds_ = false;  // a Unix socket: descriptors can ride along
};

/// A listening socket in the abstract namespace; destroyed, it frees the name.
class FdListener {
 public:
  /// Binds `name` (e.g. "pickle-<token>-<rank>"; at most 100 characters). A name in use is a SystemError.
  explicit FdListener(std::string name);

  /// Accepts one connection from a process of the same user (others are refused with a ProtocolError).
  FdChannel accept(const Deadline& deadline);
  const std::string& name() const { return name_; }

 private:
  UniqueFd socket_;
  std::string name_;
};

}  // namespace pickle::device
