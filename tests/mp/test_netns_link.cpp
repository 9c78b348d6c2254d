// The impaired link that the two-host tests run over (netns_pair.hpp): does it delay and drop what it claims? UDP
// pings from namespace 1 to an echo in namespace 0, each thread moved into its namespace: every round trip takes at
// least the two 1 ms delays, and about 2% of them (1% each way) never come back.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "netns_pair.hpp"

namespace pickle::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPort = 47311;
constexpr int kPings = 2000;

/// A UDP socket bound to `address`:`port` (port 0: any), with receives that give up after `timeout`; -1 on failure.
int udp_socket(const std::string& address, int port, std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address.c_str(), &local.sin_addr);
  timeval limit{0, static_cast<suseconds_t>(timeout.count() * 1000)};
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(NetnsLink, TheImpairedLinkDelaysEveryPacketAndDropsAboutOnePercentEachWay) {
  std::string why_not;
  auto pair = NetnsPair::create(&why_not);
  if (!pair) GTEST_SKIP() << why_not;
  std::cout << "link impairment: " << pair->impairment() << std::endl;
  if (pair->impairment().find("delay 1ms") == std::string::npos) {
    GTEST_SKIP() << "this link adds no delay: " << pair->impairment();
  }

  // The echo, in namespace 0: sends every datagram back until told to stop.
  std::atomic<bool> stop{false};
  std::string echo_failure;
  std::thread echo([&] {
    if (!enter_network_namespace(pair->ns(0), &echo_failure)) return;
    const int fd = udp_socket(pair->address(0), kPort, std::chrono::milliseconds(50));
    if (fd < 0) {
      echo_failure = std::string("echo socket: ") + std::strerror(errno);
      return;
    }
    char datagram[64];
    while (!stop.load()) {
      sockaddr_in from{};
      socklen_t from_size = sizeof from;
      const ssize_t size = ::recvfrom(fd, datagram, sizeof datagram, 0, reinterpret_cast<sockaddr*>(&from), &from_size);
      if (size > 0) ::sendto(fd, datagram, static_cast<size_t>(size), 0, reinterpret_cast<sockaddr*>(&from), from_size);
    }
    ::close(fd);
  });

  // The pings, from namespace 1, one at a time: a reply that is not back within 100 ms counts as lost.
  std::vector<double> round_trip_ms;
  int lost = 0, sent_pings = 0;
  std::string ping_failure;
  std::thread pinger([&] {
    if (!enter_network_namespace(pair->ns(1), &ping_failure)) return;
    const int fd = udp_socket(pair->address(1), 0, std::chrono::milliseconds(100));
    if (fd < 0) {
      ping_failure = std::string("ping socket: ") + std::strerror(errno);
      return;
    }
    sockaddr_in echo_address{};
    echo_address.sin_family = AF_INET;
    echo_address.sin_port = htons(kPort);
    ::inet_pton(AF_INET, pair->address(0).c_str(), &echo_address.sin_addr);
    int lost_in_a_row = 0;
    for (int ping = 0; ping < kPings && lost_in_a_row < 50; ++ping, ++sent_pings) {
      const auto sent = Clock::now();
      ::sendto(fd, &ping, sizeof ping, 0, reinterpret_cast<sockaddr*>(&echo_address), sizeof echo_address);
      bool back = false;
      for (int reply = -1; !back;) {
        if (::recv(fd, &reply, sizeof reply, 0) != sizeof reply) break;  // timed out: lost
        back = reply == ping;  // an older ping's late reply is skipped
      }
      if (back) {
        round_trip_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
        lost_in_a_row = 0;
      } else {
        ++lost;
        ++lost_in_a_row;  // 50 in a row: the link is broken, no need to wait out every ping (the checks fail)
      }
    }
    ::close(fd);
  });
  pinger.join();
  stop = true;
  echo.join();
  ASSERT_EQ(echo_failure, "");
  ASSERT_EQ(ping_failure, "");
  ASSERT_EQ(sent_pings, kPings) << "50 pings in a row lost: the link stopped carrying packets";
  ASSERT_FALSE(round_trip_ms.empty());

  std::sort(round_trip_ms.begin(), round_trip_ms.end());
  const double median = round_trip_ms[round_trip_ms.size() / 2];
  std::cout << kPings << " pings: " << lost << " lost, round trip min " << round_trip_ms.front() << " ms, median "
            << median << " ms; " << pair->drops() << std::endl;
  // 1 ms each way, never less (timer slack only adds); the median well below the 100 ms that counts as lost.
  EXPECT_GE(round_trip_ms.front(), 1.95);
  EXPECT_LT(median, 20.0);
  // A round trip survives with probability 0.99^2: about 40 of 2000 lost (standard deviation 6.3). The bounds are
  // 4.8 deviations below and 8 above, so that only a link without loss, or with far more, fails.
  EXPECT_GE(lost, 10);
  EXPECT_LE(lost, 90);
  if (const DelayLink* link = pair->delay_link()) {
    // Each way dropped some of the pings or of the replies, and no packet was lost to a full queue.
    EXPECT_GT(link->dropped(0), 0u);
    EXPECT_GT(link->dropped(1), 0u);
    EXPECT_EQ(link->overflowed(0) + link->overflowed(1), 0u);
  }
}

}  // namespace
}  // namespace pickle::test
