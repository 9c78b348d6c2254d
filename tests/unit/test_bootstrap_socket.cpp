// Where rank 0's store and each rank's control listener listen, and which address a rank publishes for ranks of
// other hosts: never a loopback address when other hosts take part (a hostname that /etc/hosts maps to 127.0.1.1 on
// the store's host, as Debian does, resolves elsewhere to the real address, which a loopback listener refuses).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <pickle/error.hpp>

#include "bootstrap/socket.hpp"

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
