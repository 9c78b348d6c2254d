// FdChannel: message boundaries, descriptor passing, and everything a broken or hostile peer can send.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <pickle/error.hpp>

#include "bootstrap/socket.hpp"
#include "device/fd_channel.hpp"

namespace pickle::device {
namespace {

std::string unique_name(const char* what) {
  static int counter = 0;
  return "pickle-test-" + std::to_string(getpid()) + "-" + what + "-" + std::to_string(counter++);
}

Deadline soon() { return Deadline(std::chrono::seconds(5)); }

std::vector<std::byte> text(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

/// A raw client socket, for sending what FdChannel never would.
UniqueFd raw_connect(const std::string& name) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), length) != 0) throw std::runtime_error("connect");
  return fd;
}

TEST(FdChannel, MessagesKeepBoundariesAndCarryOneFd) {
  FdListener listener(unique_name("basic"));
  FdChannel client = FdChannel::connect(listener.name(), soon());
  FdChannel server = listener.accept(soon());

  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);

  client.send(text("first"), write_end.get(), soon());
  client.send(text(""), soon());
  std::vector<std::byte> big(300000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 13);
  std::thread sender([&] { client.send(big, soon()); });  // larger than the socket buffer: needs a reader

  FdMessage first = server.recv(soon());
  EXPECT_EQ(first.bytes, text("first"));
  ASSERT_TRUE(first.fd.valid());
  ASSERT_EQ(::write(first.fd.get(), "x", 1), 1);  // the received fd is the same pipe
  char c = 0;
  ASSERT_EQ(::read(read_end.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');

  FdMessage empty = server.recv(soon());
  EXPECT_TRUE(empty.bytes.empty());
  EXPECT_FALSE(empty.fd.valid());
  FdMessage large = server.recv(soon());
  sender.join();
  EXPECT_EQ(large.bytes, big);
}

TEST(FdChannel, ClosedPeerIsAPeerError) {
  FdListener listener(unique_name("closed"));
  auto client = std::make_unique<FdChannel>(FdChannel::connect(listener.name(), soon()));
  FdChannel server = listener.accept(soon());
  server.set_peer(3);
  client.reset();
  try {
    server.recv(soon());
    FAIL();
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer(), 3);
    EXPECT_NE(std::string(e.what()).find("peer 3"), std::string::npos) << e.what();
  }
}

TEST(FdChannel, SilenceIsATimeout) {
  FdListener listener(unique_name("silent"));
  FdChannel client = FdChannel::connect(listener.name(), soon());
  FdChannel server = listener.accept(soon());
  EXPECT_THROW(server.recv(Deadline(std::chrono::milliseconds(200))), TimeoutError);
  EXPECT_THROW(listener.accept(Deadline(std::chrono::milliseconds(200))), TimeoutError);
}

TEST(FdChannel, ConnectWithoutListenerTimesOut) {
  Stopwatch watch;
  EXPECT_THROW(FdChannel::connect(unique_name("nobody"), Deadline(std::chrono::milliseconds(300))), TimeoutError);
  EXPECT_LT(watch.seconds(), 2.0);
}

TEST(FdChannel, ConnectWaitsForALateListener) {
  std::string name = unique_name("late");
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    FdListener listener(name);
    FdChannel server = listener.accept(soon());
    server.send(text("hello"), soon());
    server.recv(soon());  // keep the socket open until the client has read
  });
  FdChannel client = FdChannel::connect(name, soon());
  EXPECT_EQ(client.recv(soon()).bytes, text("hello"));
  client.send(text("bye"), soon());
  late.join();
}

TEST(FdChannel, NameInUseIsRefused) {
  FdListener listener(unique_name("taken"));
  EXPECT_THROW(FdListener{listener.name()}, SystemError);
  EXPECT_THROW(FdListener{""}, InvalidArgument);
  EXPECT_THROW(FdListener{std::string(200, 'x')}, InvalidArgument);
}

TEST(FdChannel, OversizedLengthIsRejectedWithoutAllocating) {
  FdListener listener(unique_name("huge"));
  UniqueFd raw = raw_connect(listener.name());
  FdChannel server = listener.accept(soon());
  unsigned char header[4] = {0xff, 0xff, 0xff, 0x7f};  // announces 2 GiB
  ASSERT_EQ(::write(raw.get(), header, 4), 4);
  EXPECT_THROW(server.recv(soon()), ProtocolError);

  FdListener second(unique_name("limit"));
  FdChannel client = FdChannel::connect(second.name(), soon());
  FdChannel other = second.accept(soon());
  client.send(std::vector<std::byte>(100), soon());
  EXPECT_THROW(other.recv(soon(), 99), ProtocolError);  // the caller's own, tighter limit
  EXPECT_THROW(client.send(std::vector<std::byte>(kFdChannelMaxMessage + 1), soon()), InvalidArgument);
}

TEST(FdChannel, TruncatedMessageIsAPeerError) {
  FdListener listener(unique_name("truncated"));
  UniqueFd raw = raw_connect(listener.name());
  FdChannel server = listener.accept(soon());
  unsigned char partial[6] = {10, 0, 0, 0, 'a', 'b'};  // announces 10 bytes, sends 2, hangs up
  ASSERT_EQ(::write(raw.get(), partial, sizeof partial), static_cast<ssize_t>(sizeof partial));
  raw.reset();
  EXPECT_THROW(server.recv(soon()), PeerError);
}

TEST(FdChannel, TwoDescriptorsAreRejectedAndClosed) {
  FdListener listener(unique_name("twofds"));
  UniqueFd raw = raw_connect(listener.name());
  FdChannel server = listener.accept(soon());

  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  unsigned char frame[5] = {1, 0, 0, 0, 'z'};
  iovec part{frame, sizeof frame};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int both[2] = {read_end.get(), write_end.get()};
  std::memcpy(CMSG_DATA(c), both, sizeof both);
  ASSERT_EQ(::sendmsg(raw.get(), &message, 0), static_cast<ssize_t>(sizeof frame));
  EXPECT_THROW(server.recv(soon()), ProtocolError);

  // Both received copies were closed: once ours of the write end closes too, the read end sees end-of-file.
  write_end.reset();
  char byte = 0;
  EXPECT_EQ(::read(read_end.get(), &byte, 1), 0);
}

// Between hosts the control channel is TCP: framed messages as over a Unix socket, and a descriptor is refused
// before anything is sent (it could not reach another host).
TEST(FdChannel, OverTcpCarriesMessagesAndRefusesDescriptors) {
  bootstrap::Listener listener = bootstrap::listen_tcp("127.0.0.1", 0);
  std::string error;
  UniqueFd client_fd = bootstrap::connect_tcp("127.0.0.1", listener.port, soon(), error);
  ASSERT_TRUE(client_fd.valid()) << error;
  UniqueFd server_fd;
  for (int attempt = 0; attempt < 500 && !server_fd.valid(); ++attempt) {
    server_fd = UniqueFd(::accept4(listener.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!server_fd.valid()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(server_fd.valid());
  FdChannel client(std::move(client_fd), "tcp client");
  FdChannel server(std::move(server_fd), "tcp server");
  client.set_peer(1);

  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  try {
    client.send(text("with an fd"), write_end.get(), soon());
    FAIL() << "a descriptor was accepted over TCP";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("another host"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("peer 1"), std::string::npos) << e.what();
  }
  std::vector<std::byte> big(300000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 7);
  std::thread sender([&] {
    client.send(text("first"), soon());
    client.send(big, soon());
  });
  EXPECT_EQ(server.recv(soon()).bytes, text("first"));  // the refused message left nothing on the wire
  FdMessage large = server.recv(soon());
  sender.join();
  EXPECT_EQ(large.bytes, big);
  EXPECT_FALSE(large.fd.valid());
}

TEST(LocalAddress, IsTheSourceAddressOfTheRouteToAHost) {
  EXPECT_EQ(bootstrap::local_address_towards("127.0.0.1", 29500), "127.0.0.1");
  EXPECT_THROW(bootstrap::local_address_towards("no-such-host.invalid", 29500), InvalidArgument);
}

}  // namespace
}  // namespace pickle::device
