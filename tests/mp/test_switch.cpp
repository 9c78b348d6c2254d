// pickle's software switch (seed 002's SwitchML aggregation) with real UDP sockets: workers on threads sum tensors
// through it exactly, over calls that reuse its slots, through dropped datagrams on both ways, and a worker whose
// peer never comes fails within its timeout naming the switch.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/switch_server.hpp"
#include "../../tools/pickle/bench/switch_worker.hpp"

namespace pickle::test {
namespace {

using bench::switchml::SoftwareSwitch;
using bench::switchml::SwitchWorker;

/// Each of `workers` threads sums its own random tensor of `count` through `sw`, `calls` times; every result must
/// be the element-wise sum of all workers' tensors of that call (wrapping as int32 does).
void sum_through(SoftwareSwitch& sw, int workers, int slots, int numel, std::size_t count, int calls,
                 std::uint64_t& resends, const std::string& host = "127.0.0.1") {
  std::vector<std::vector<std::vector<std::int32_t>>> inputs(static_cast<std::size_t>(calls));
  std::mt19937 random(7);
  for (auto& call : inputs) {
    for (int w = 0; w < workers; ++w) {
      std::vector<std::int32_t> tensor(count);
      for (auto& x : tensor) x = static_cast<std::int32_t>(random());
      call.push_back(std::move(tensor));
    }
  }
  std::vector<std::vector<std::vector<std::int32_t>>> outputs = inputs;
  std::vector<std::string> errors(static_cast<std::size_t>(workers));
  std::vector<std::uint64_t> worker_resends(static_cast<std::size_t>(workers));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      try {
        SwitchWorker worker(host, sw.port(), {.worker = w, .slots = slots, .numel = numel, .resend_after_s = 0.005});
        for (int c = 0; c < calls; ++c) {
          worker.allreduce(outputs[static_cast<std::size_t>(c)][static_cast<std::size_t>(w)].data(), count, 20,
                           "test allreduce");
        }
        worker_resends[static_cast<std::size_t>(w)] = worker.resends();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(w)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  resends = 0;
  for (int w = 0; w < workers; ++w) {
    ASSERT_EQ(errors[static_cast<std::size_t>(w)], "") << "worker " << w;
    resends += worker_resends[static_cast<std::size_t>(w)];
  }
  for (int c = 0; c < calls; ++c) {
    for (std::size_t i = 0; i < count; ++i) {
      std::uint32_t expected = 0;
      for (int w = 0; w < workers; ++w) expected += static_cast<std::uint32_t>(inputs[c][w][i]);
      for (int w = 0; w < workers; ++w) {
        ASSERT_EQ(static_cast<std::uint32_t>(outputs[c][w][i]), expected)
            << "call " << c << " worker " << w << " element " << i;
      }
    }
  }
}

TEST(SoftwareSwitch, WorkersGetExactSumsOverCallsThatReuseTheSlots) {
  // 1000 elements in chunks of 64: 16 chunks (the last of 40) over 4 slots, four rounds of each slot per call.
  SoftwareSwitch sw({.workers = 3, .slots = 4});
  std::uint64_t resends = 0;
  sum_through(sw, 3, 4, 64, 1000, 5, resends);
  const auto c = sw.counters();
  EXPECT_EQ(c.malformed, 0u);
  EXPECT_GE(c.sent, 3u * 16 * 5) << "a sum per worker, chunk and call";
}

// A worker that names the switch by an address its answers do not come from (127.0.1.1, as a Debian host's own
// name resolves; the switch answers from 127.0.0.1, the loopback route's source) still gets them: until 2026-11-30
// its socket was connected to the address it named and dropped every answer (found by review).
TEST(SoftwareSwitch, AWorkerThatNamesTheSwitchByAnotherAddressGetsItsSums) {
  SoftwareSwitch sw({.workers = 2, .slots = 4});
  std::uint64_t resends = 0;
  sum_through(sw, 2, 4, 16, 200, 2, resends, "127.0.1.1");
}

TEST(SoftwareSwitch, DroppedDatagramsBothWaysAreResentAndAnsweredAgain) {
  SoftwareSwitch sw({.workers = 2, .slots = 8, .drop_every = 5});
  std::uint64_t resends = 0;
  sum_through(sw, 2, 8, 32, 3000, 3, resends);
  const auto c = sw.counters();
  EXPECT_GT(c.dropped, 0u);
  EXPECT_GT(resends, 0u);
  EXPECT_GT(c.duplicates, 0u) << "lost sums come back as resends of finished chunks";
}

TEST(SoftwareSwitch, AWorkerWhosePeerNeverComesFailsWithinItsTimeoutNamingTheSwitch) {
  SoftwareSwitch sw({.workers = 2, .slots = 4});
  SwitchWorker lonely("127.0.0.1", sw.port(), {.worker = 0, .slots = 4, .numel = 16});
  std::vector<std::int32_t> data(100, 1);
  const auto start = std::chrono::steady_clock::now();
  try {
    lonely.allreduce(data.data(), data.size(), 1.0, "rank 0: software switch allreduce of 400 bytes");
    FAIL() << "no peer, yet the allreduce finished";
  } catch (const TimeoutError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("rank 0: software switch allreduce of 400 bytes"), std::string::npos) << text;
    EXPECT_NE(text.find("127.0.0.1:" + std::to_string(sw.port())), std::string::npos) << text;
    EXPECT_NE(text.find("0 of 7 chunks"), std::string::npos) << text;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(took, 1.0);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(data, std::vector<std::int32_t>(100, 1)) << "a tensor without its sums keeps its own values";
}

TEST(SoftwareSwitch, DatagramsOfAnotherKindAreCountedAndIgnored) {
  SoftwareSwitch sw({.workers = 1, .slots = 2});
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(sw.port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char garbage[] = "not a switch packet at all";
  ASSERT_GT(::sendto(fd, garbage, sizeof garbage, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
  for (int i = 0; i < 200 && sw.counters().malformed == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::close(fd);
  EXPECT_EQ(sw.counters().malformed, 1u);
  std::uint64_t resends = 0;
  sum_through(sw, 1, 2, 8, 50, 2, resends);  // and it still serves
}

}  // namespace
}  // namespace pickle::test
