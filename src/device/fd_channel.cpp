#include "device/fd_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::device {
namespace {

constexpr std::size_t kHeaderBytes = 4;
// Room for several descriptors, so that a peer sending too many is detected (and all of them closed) rather than
// silently truncated.
constexpr int kMaxFdsPerRead = 8;

sockaddr_un abstract_address(const std::string& name, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (name.empty() || name.size() > sizeof(address.sun_path) - 2) {
    throw InvalidArgument(cat("fd channel name '", name, "' must have 1 to ", sizeof(address.sun_path) - 2,
                              " characters"));
  }
  // A leading NUL puts the name in Linux's abstract namespace: no file, freed when the socket closes.
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

UniqueFd new_socket(const std::string& name) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw SystemError(cat("fd channel '", name, "': socket"), errno);
  return fd;
}

}  // namespace

FdChannel::FdChannel(UniqueFd socket, std::string name) : socket_(std::move(socket)), name_(std::move(name)) {
  int domain = 0;
  socklen_t length = sizeof domain;
  passes_fds_ = ::getsockopt(socket_.get(), SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 && domain == AF_UNIX;
}

FdChannel FdChannel::connect(const std::string& name, const Deadline& deadline) {
  socklen_t length = 0;
  sockaddr_un address = abstract_address(name, length);
  while (true) {
    UniqueFd fd = new_socket(name);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) == 0) {
      return FdChannel(std::move(fd), name);
    }
    int error = errno;
    // Not listening yet (ECONNREFUSED) or its backlog is full (EAGAIN): the peer may simply be slower than us.
    if (error != ECONNREFUSED && error != EAGAIN && error != ENOENT && error != EINTR) {
      throw SystemError(cat("fd channel '", name, "': connect"), error);
    }
    if (deadline.expired()) {
      throw TimeoutError(cat("fd channel '", name, "': no listener accepted a connection within ",
                             static_cast<double>(deadline.timeout().count()) / 1000.0, " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10, std::max(1, deadline.remaining_ms()))));
  }
}

std::string FdChannel::what(std::string_view op, std::size_t bytes) const {
  return cat("fd channel '", name_, "': ", describe({.peer = peer_, .op = op, .bytes = bytes}));
}

void FdChannel::wait_ready(short events, const Deadline& deadline, std::string_view op, std::size_t bytes) {
  while (true) {
    pollfd entry{.fd = socket_.get(), .events = events, .revents = 0};
    int ready = ::poll(&entry, 1, deadline.remaining_ms());
    if (ready > 0) return;  // readable, writable, or an error/hang-up that the next call reports precisely
    if (ready < 0 && errno != EINTR) throw SystemError(what(op, bytes) + ": poll", errno);
    if (ready == 0 && deadline.expired()) {
      throw TimeoutError(what(op, bytes) + cat(": nothing after ",
                                               static_cast<double>(deadline.timeout().count()) / 1000.0, " s"));
    }
  }
}

void FdChannel::send(std::span<const std::byte> bytes, int fd, const Deadline& deadline) {
  if (bytes.size() > kFdChannelMaxMessage) {
    throw InvalidArgument(what("send", bytes.size()) + cat(": messages are limited to ", kFdChannelMaxMessage,
                                                           " bytes"));
  }
  if (fd >= 0 && !passes_fds_) {
    throw InvalidArgument(what("send", bytes.size()) + ": a file descriptor cannot travel to another host");
  }
  std::byte header[kHeaderBytes];
  auto length = static_cast<std::uint32_t>(bytes.size());
  for (std::size_t i = 0; i < kHeaderBytes; ++i) header[i] = static_cast<std::byte>((length >> (8 * i)) & 0xff);

  std::size_t total = kHeaderBytes + bytes.size();
  std::size_t sent = 0;
  bool fd_sent = fd < 0;
  while (sent < total) {
    iovec parts[2];
    int count = 0;
    if (sent < kHeaderBytes) {
      parts[count++] = {header + sent, kHeaderBytes - sent};
      if (!bytes.empty()) parts[count++] = {const_cast<std::byte*>(bytes.data()), bytes.size()};
    } else {
      std::size_t done = sent - kHeaderBytes;
      parts[count++] = {const_cast<std::byte*>(bytes.data()) + done, bytes.size() - done};
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<decltype(message.msg_iovlen)>(count);
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (!fd_sent) {
      // The descriptor rides on the first byte of the frame; the receiver collects it with the header.
      std::memset(control, 0, sizeof control);
      message.msg_control = control;
      message.msg_controllen = sizeof control;
      cmsghdr* header_cmsg = CMSG_FIRSTHDR(&message);
      header_cmsg->cmsg_level = SOL_SOCKET;
      header_cmsg->cmsg_type = SCM_RIGHTS;
      header_cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(header_cmsg), &fd, sizeof(int));
    }
    ssize_t n = ::sendmsg(socket_.get(), &message, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      fd_sent = true;
      continue;
    }
    int error = errno;
    if (n < 0 && (error == EAGAIN || error == EWOULDBLOCK || error == EINTR)) {
      wait_ready(POLLOUT, deadline, "send", bytes.size());
      continue;
    }
    if (error == EPIPE || error == ECONNRESET) {
      throw PeerError(what("send", bytes.size()) + ": the peer closed the connection", peer_);
    }
    throw SystemError(what("send", bytes.size()) + ": sendmsg", error);
  }
}

void FdChannel::read_exact(std::byte* out, std::size_t bytes, std::vector<UniqueFd>& fds, const Deadline& deadline,
                           std::size_t message_bytes) {
  std::size_t got = 0;
  while (got < bytes) {
    iovec part{out + got, bytes - got};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRead)];
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(socket_.get(), &message, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      int error = errno;
      if (error == EAGAIN || error == EWOULDBLOCK || error == EINTR) {
        wait_ready(POLLIN, deadline, "recv", message_bytes);
        continue;
      }
      if (error == ECONNRESET) throw PeerError(what("recv", message_bytes) + ": connection reset by the peer", peer_);
      throw SystemError(what("recv", message_bytes) + ": recvmsg", error);
    }
    // Take ownership of every descriptor first, so that all of them are closed whatever we throw next.
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(fd);
      }
    }
    if (message.msg_flags & MSG_CTRUNC) {
      throw ProtocolError(what("recv", message_bytes) + ": the peer attached more descriptors than allowed");
    }
    if (n == 0) {
      throw PeerError(what("recv", message_bytes) + cat(": the peer closed the connection after ", got, " of ",
                                                        bytes, " bytes"),
                      peer_);
    }
    got += static_cast<std::size_t>(n);
  }
}

FdMessage FdChannel::recv(const Deadline& deadline, std::size_t max_bytes) {
  std::vector<UniqueFd> fds;
  std::byte header[kHeaderBytes];
  read_exact(header, kHeaderBytes, fds, deadline, 0);
  std::size_t length = 0;
  for (std::size_t i = 0; i < kHeaderBytes; ++i) length |= static_cast<std::size_t>(header[i]) << (8 * i);
  if (length > max_bytes || length > kFdChannelMaxMessage) {
    throw ProtocolError(what("recv", length) + cat(": longer than the ", std::min(max_bytes, kFdChannelMaxMessage),
                                                   " bytes allowed"));
  }
  FdMessage message;
  message.bytes.resize(length);
  if (length > 0) read_exact(message.bytes.data(), length, fds, deadline, length);
  if (fds.size() > 1) {
    throw ProtocolError(what("recv", length) + cat(": ", fds.size(), " descriptors attached, at most 1 allowed"));
  }
  if (!fds.empty()) message.fd = std::move(fds.front());
  return message;
}

FdListener::FdListener(std::string name) : name_(std::move(name)) {
  socklen_t length = 0;
  sockaddr_un address = abstract_address(name_, length);
  socket_ = new_socket(name_);
  if (::bind(socket_.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    throw SystemError(cat("fd channel '", name_, "': bind"), errno);
  }
  if (::listen(socket_.get(), 64) != 0) throw SystemError(cat("fd channel '", name_, "': listen"), errno);
}

FdChannel FdListener::accept(const Deadline& deadline) {
  while (true) {
    UniqueFd fd(::accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd) {
      // Abstract sockets have no file permissions: anyone in the network namespace may connect. Only a process of
      // our own user may hand us descriptors to map.
      ucred credentials{};
      socklen_t size = sizeof credentials;
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
        throw SystemError(cat("fd channel '", name_, "': SO_PEERCRED"), errno);
      }
      if (credentials.uid != ::geteuid()) {
        throw ProtocolError(cat("fd channel '", name_, "': refused a connection from uid ", credentials.uid,
                                " (pid ", credentials.pid, "); only uid ", ::geteuid(), " may connect"));
      }
      return FdChannel(std::move(fd), name_);
    }
    int error = errno;
    if (error != EAGAIN && error != EWOULDBLOCK && error != EINTR && error != ECONNABORTED) {
      throw SystemError(cat("fd channel '", name_, "': accept"), error);
    }
    pollfd entry{.fd = socket_.get(), .events = POLLIN, .revents = 0};
    int ready = ::poll(&entry, 1, deadline.remaining_ms());
    if (ready < 0 && errno != EINTR) throw SystemError(cat("fd channel '", name_, "': poll"), errno);
    if (ready == 0 && deadline.expired()) {
      throw TimeoutError(cat("fd channel '", name_, "': no peer connected within ",
                             static_cast<double>(deadline.timeout().count()) / 1000.0, " s"));
    }
  }
}

}  // namespace pickle::device
