// Where rank 0's store and each rank's control listener listen, and which address a rank publishes for ranks of
// other hosts: never a loopback address when other hosts take part (a hostname that /etc/hosts maps to 127.0.1.1 on
// the store's host, as Debian does, resolves elsewhere to the real address, which a loopback listener refuses).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdlib>

#include <pickle/error.hpp>

#include "bootstrap/socket.hpp"
#include "core/clock.hpp"

namespace pickle::bootstrap {
namespace {

std::string bound_host(const Listener& listener) {
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  EXPECT_EQ(getsockname(listener.fd.get(), reinterpret_cast<sockaddr*>(&bound), &length), 0);
  char text[64] = "?";
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(bound).sin_addr, text, sizeof text);
  return text;
}

TEST(BootstrapSocket, ALoopbackStoreAddressListensOnEveryInterfaceWhenOtherHostsConnect) {
  Listener alone = listen_tcp("127.0.0.1", 0);
  EXPECT_EQ(bound_host(alone), "127.0.0.1");  // one host: stay on loopback
  Listener shared = listen_tcp("127.0.0.1", 0, /*other_hosts_connect=*/true);
  EXPECT_EQ(bound_host(shared), "0.0.0.0");
  EXPECT_GT(shared.port, 0);
}

int int_option(int fd, int level, int name) {
  int value = -1;
  socklen_t length = sizeof value;
  EXPECT_EQ(getsockopt(fd, level, name, &value, &length), 0) << "option " << name;
  return value;
}

// The store's and the control channels' connections notice a peer host that vanished without a reset: keepalive
// probes after 10 s of silence, given up after PICKLE_TIMEOUT without an acknowledgement (socket.hpp says why).
TEST(BootstrapSocket, TheUnacknowledgedLimitIsPickleTimeoutAndAtLeastTheProbes) {
  EXPECT_EQ(unacknowledged_limit_seconds(), 60);  // PICKLE_TIMEOUT's default
  setenv("PICKLE_TIMEOUT", "7", 1);
  EXPECT_EQ(unacknowledged_limit_seconds(), kKeepaliveIdleSeconds + kKeepaliveProbes * kKeepaliveIntervalSeconds);
  setenv("PICKLE_TIMEOUT", "90.5", 1);
  EXPECT_EQ(unacknowledged_limit_seconds(), 91);
  setenv("PICKLE_TIMEOUT", "nonsense", 1);
  EXPECT_EQ(unacknowledged_limit_seconds(), 60);
  unsetenv("PICKLE_TIMEOUT");
}

TEST(BootstrapSocket, ConnectionsProbeASilentPeerAndGiveUpOnUnacknowledgedData) {
  Listener listener = listen_tcp("127.0.0.1", 0);
  std::string error;
  UniqueFd client = connect_tcp("127.0.0.1", listener.port, Deadline::after_seconds(10), error);
  ASSERT_TRUE(client.valid()) << error;
  UniqueFd accepted(::accept(listener.fd.get(), nullptr, nullptr));
  ASSERT_TRUE(accepted.valid());
  configure_tcp_socket(accepted.get());  // as the store server and the control listener do
  for (int fd : {client.get(), accepted.get()}) {
    EXPECT_EQ(int_option(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE), kKeepaliveIdleSeconds);
    EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL), kKeepaliveIntervalSeconds);
    EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_KEEPCNT), kKeepaliveProbes);
    EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), unacknowledged_limit_seconds() * 1000);
    EXPECT_EQ(int_option(fd, IPPROTO_TCP, TCP_NODELAY), 1);
  }
}

TEST(BootstrapSocket, LoopbackAddressesAreRecognised) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("127.0.1.1"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_TRUE(is_loopback_address("::ffff:127.0.0.1"));
  EXPECT_FALSE(is_loopback_address("10.0.0.1"));
  EXPECT_FALSE(is_loopback_address("192.168.1.7"));
  EXPECT_FALSE(is_loopback_address("fe80::1"));
  EXPECT_FALSE(is_loopback_address("not an address"));
}

TEST(BootstrapSocket, AnAddressForOtherHostsIsNeverLoopback) {
  // Depends on the machine's interfaces: where it has none but loopback, the answer is a clear error.
  try {
    const std::string address = non_loopback_address_like("127.0.0.1");
    EXPECT_FALSE(is_loopback_address(address)) << address;
    EXPECT_EQ(address.find(':'), std::string::npos) << "an IPv4 address was asked for: " << address;
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("non-loopback"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pickle::bootstrap
