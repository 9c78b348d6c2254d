// The net transport (libfabric) between real processes: tcp over loopback (PICKLE_NET_IFACE=lo), sizes from 0 B to
// 256 MiB around chunk boundaries, 1-4 lanes, 2-4 ranks with every pair busy both ways, expectations posted before
// and after the data lands, a peer SIGKILLed mid-transfer, bad options and misuse, and two ranks in separate
// network namespaces over an impaired veth link. Rank programs: net_transport_children.cpp.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "rank_statuses.hpp"
#include "subprocess.hpp"

#ifdef PICKLE_HAVE_LIBFABRIC
#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "device/memory.hpp"
#include "netns_pair.hpp"
#include "transport/net/address_exchange.hpp"
#include "transport/net/net_transport.hpp"
#endif

namespace pickle::test {
namespace {

#ifndef PICKLE_HAVE_LIBFABRIC

TEST(NetTransport, NeedsLibfabric) {
  GTEST_SKIP() << "pickle was built without libfabric (apt-get install libfabric-dev): no net transport to test";
}

#else

using transport::net::NetOptions;
using transport::net::NetTransport;

std::vector<std::string> net_env(int lanes, std::size_t chunk, int timeout = 30) {
  return {"PICKLE_NET_PROVIDER=tcp", "PICKLE_NET_IFACE=lo", "PICKLE_NET_LANES=" + std::to_string(lanes),
          "PICKLE_NET_CHUNK=" + std::to_string(chunk), "PICKLE_TIMEOUT=" + std::to_string(timeout)};
}

// 64 KiB chunks: every size below lands on, just before or just after a chunk boundary, or spans many chunks.
const std::string kBoundarySizes = "0,1,7,4095,4096,4097,65535,65536,65537,131071,131072,196625,1048577";

class NetLanes : public testing::TestWithParam<int> {};
TEST_P(NetLanes, TwoRanksSizesAroundChunkBoundariesBothWays) {
  expect_all_ok(run_ranks("net_exchange", 2, {kBoundarySizes, "3"}, net_env(GetParam(), 65536)));
}
INSTANTIATE_TEST_SUITE_P(Net, NetLanes, testing::Values(1, 2, 3, 4),
                         [](const testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "lanes"; });

TEST(NetTransport, ThreeRanksEveryPairBothWays) {
  expect_all_ok(run_ranks("net_exchange", 3, {"0,1,4097,65536,65537,300001", "4"}, net_env(3, 65536)));
}

TEST(NetTransport, FourRanksEveryPairBothWays) {
  expect_all_ok(run_ranks("net_exchange", 4, {"1,4096,65537,262147", "3"}, net_env(2, 65536)));
}

TEST(NetTransport, HundredsOfSmallMessagesInFlightBothWays) {
  expect_all_ok(run_ranks("net_exchange", 2, {"1,13,4096,5000,8191", "100"}, net_env(3, 4096)));
}

TEST(NetTransport, ExpectAfterTheChunksLanded) {
  expect_all_ok(run_ranks("net_exchange", 2, {"0,5,70000,200000", "4", "late"}, net_env(2, 65536)));
}

TEST(NetTransport, TwoHundredFiftySixMiBEachWayOverFourLanes) {
  expect_all_ok(run_ranks("net_exchange", 2, {"268435456", "1"}, net_env(4, 1 << 20, 60), std::chrono::seconds(100)));
}

TEST(NetTransport, OddLargeSizesWithDefaultChunks) {
  expect_all_ok(run_ranks("net_exchange", 2, {"1048575,1048577,33554433", "2"}, net_env(4, 1 << 20)));
}

TEST(NetTransport, ShmProviderWithVirtualAddresses) {
  // libfabric's shm provider addresses remote memory by virtual address (FI_MR_VIRT_ADDR), tcp by offset: both paths.
  if (transport::net::offered_providers().find("shm (") == std::string::npos) {
    GTEST_SKIP() << "libfabric offers no shm provider here: " << transport::net::offered_providers();
  }
  auto env = net_env(2, 65536);
  env[0] = "PICKLE_NET_PROVIDER=shm";
  env[1] = "PICKLE_NET_IFACE=";
  expect_all_ok(run_ranks("net_exchange", 2, {kBoundarySizes, "2"}, env));
}

TEST(NetTransport, PeerKilledMidTransferIsReportedWithinTheTimeout) {
  auto statuses = run_ranks("net_peer_death", 2, {}, net_env(2, 1 << 20, 5), std::chrono::seconds(60));
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
}

TEST(NetTransport, ReleasingAKilledPeerDropsItsWritesAtOnceWithoutWaitingForTheTimeout) {
  auto statuses = run_ranks("net_release_dead_peer", 2, {}, net_env(2, 1 << 20, 20), std::chrono::seconds(60));
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
}

TEST(NetTransport, AReceiveExpectedLongBeforeItsSendIsNotAFault) {
  expect_all_ok(run_ranks("net_late_sender", 2, {}, net_env(2, 65536, 2), std::chrono::seconds(60)));
}

TEST(NetTransport, ASilentPeerThatOwesAMarkedMessageFailsWithinTheTimeout) {
  expect_all_ok(run_ranks("net_owed_message", 2, {}, net_env(2, 65536, 3), std::chrono::seconds(90)));
}

TEST(NetTransport, WriteToAPeerThatDiedBeforeAnyMessageFailsWithinTheTimeout) {
  auto statuses = run_ranks("net_write_to_dead_peer", 2, {}, net_env(2, 1 << 20, 4), std::chrono::seconds(60));
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
}

TEST(NetTransport, RanksWithDifferentLaneCountsRefuseToConnect) {
  const int port = free_tcp_port();
  std::vector<Child> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = rank_env(rank, 2, port);
    for (const auto& entry : net_env(rank == 0 ? 2 : 3, 65536, 20)) env.push_back(entry);
    ranks.emplace_back("net_setup_refused", std::vector<std::string>{"InvalidArgument", "PICKLE_NET_LANES"}, env);
  }
  for (int rank = 0; rank < 2; ++rank) {
    auto status = ranks[rank].wait(std::chrono::seconds(60));
    EXPECT_TRUE(status.ok()) << "rank " << rank << " " << status.describe();
  }
}

TEST(NetTransport, MisuseIsAClearErrorAndTheTransportStillWorks) {
  expect_all_ok(run_ranks("net_misuse", 2, {}, net_env(2, 65536)));
}

/// Environment variables set for one test and restored afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// A transport of a world of one (no peers): what set-up does before it meets any peer.
std::unique_ptr<NetTransport> lone_transport(Store& store, const NetOptions& options) {
  return std::make_unique<NetTransport>(0, 1, std::vector<bool>{false}, store, "lone", options,
                                        Deadline::after_seconds(10), [](int, const std::string&) {});
}

TEST(NetTransportSetup, UnknownProviderIsUnavailableAndListsWhatIsOffered) {
  Store store(RankInfo{});
  NetOptions options;
  options.provider = "pigeon";
  try {
    lone_transport(store, options);
    FAIL() << "a transport over provider 'pigeon' was built";
  } catch (const UnavailableError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("provider 'pigeon'"), std::string::npos) << text;
    EXPECT_NE(text.find("fi_getinfo offers: "), std::string::npos) << text;
    EXPECT_NE(text.find("tcp"), std::string::npos) << text;
  }
}

TEST(NetTransportSetup, UnknownInterfaceIsUnavailableAndNamesIt) {
  Store store(RankInfo{});
  NetOptions options;
  options.iface = "nosuchif9";
  try {
    lone_transport(store, options);
    FAIL() << "a transport on interface nosuchif9 was built";
  } catch (const UnavailableError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("interface 'nosuchif9'"), std::string::npos) << text;
    EXPECT_NE(text.find("lo"), std::string::npos) << text;
  }
}

TEST(NetTransportSetup, OptionsOutOfRangeAreInvalidArguments) {
  {
    ScopedEnv lanes("PICKLE_NET_LANES", "0");
    EXPECT_THROW(transport::net::options_from_env(), InvalidArgument);
  }
  {
    ScopedEnv lanes("PICKLE_NET_LANES", "4294967297");
    EXPECT_THROW(transport::net::options_from_env(), InvalidArgument);
  }
  {
    ScopedEnv chunk("PICKLE_NET_CHUNK", "100");
    EXPECT_THROW(transport::net::options_from_env(), InvalidArgument);
  }
  {
    ScopedEnv chunk("PICKLE_NET_CHUNK", "lots");
    EXPECT_THROW(transport::net::options_from_env(), InvalidArgument);
  }
  NetOptions defaults = transport::net::options_from_env();
  EXPECT_EQ(defaults.lanes, 4);
  EXPECT_EQ(defaults.chunk, std::size_t(512) << 10);  // NCCL's step size; 1 MiB until 2026-11-28 (docs/env.md)
  EXPECT_EQ(defaults.provider, "tcp");
}

TEST(NetTransportSetup, ALoneTransportRegistersEachAllocationOnce) {
  Store store(RankInfo{});
  NetOptions options;
  options.iface = "lo";
  auto net = lone_transport(store, options);
  auto a = device::allocate(MemoryKind::Host, 1 << 20);
  auto b = device::allocate(MemoryKind::Host, 4096);
  auto* base = static_cast<std::byte*>(a->data());
  auto first = net->expose(base, 100);
  auto inside = net->expose(base + 4096, 8192);
  net->expose(b->data(), 4096);
  EXPECT_EQ(first.key, inside.key) << "two ranges of one allocation should share its registration";
  EXPECT_EQ(inside.addr - first.addr, 4096u) << "addresses (offsets or virtual) must keep the ranges' distance";
  auto stats = net->stats();
  EXPECT_EQ(stats.ipc_opens, 2u);
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_NE(net->description().find("lo"), std::string::npos) << net->description();
}

// Providers that move bytes with the CPU get a progress thread per lane and direction, so that a rank sending and
// receiving at once does not split one thread between both (docs/rdma.md, "Rails").
TEST(NetTransportSetup, TcpGetsARailPerLaneAndDirection) {
  Store store(RankInfo{});
  NetOptions options;
  options.iface = "lo";
  options.lanes = 3;
  auto net = lone_transport(store, options);
  EXPECT_NE(net->description().find("3 lanes on 6 progress threads (one per lane and direction)"), std::string::npos)
      << net->description();
  using Direction = NetTransport::RailLoad::Direction;
  std::vector<Direction> directions;
  for (const auto& load : net->rail_loads()) directions.push_back(load.direction);
  EXPECT_EQ(directions, (std::vector<Direction>{Direction::Sending, Direction::Sending, Direction::Sending,
                                                Direction::Landing, Direction::Landing, Direction::Landing}));
}

TEST(NetTransportSetup, EndpointCardsCarryBothDirectionsAndMustAgree) {
  using transport::net::EndpointCard;
  EndpointCard card;
  card.provider = "tcp;ofi_rxm";
  card.lanes = 2;
  card.chunk = std::size_t(512) << 10;
  card.directional = true;
  for (int i = 0; i < 4; ++i) card.names.push_back(std::vector<std::byte>(5 + i, std::byte(i)));
  card.hello_addr = 64;
  card.hello_key = 7;
  const EndpointCard back = transport::net::decode_card(transport::net::encode_card(card), "card");
  EXPECT_TRUE(back.directional);
  EXPECT_EQ(back.names, card.names);
  EXPECT_EQ(back.hello_addr, 64u);
  transport::net::check_compatible(card, back, 0, 1);

  // A directional card must name an endpoint per lane and direction.
  EndpointCard short_of_names = card;
  short_of_names.names.pop_back();
  EXPECT_THROW(transport::net::decode_card(transport::net::encode_card(short_of_names), "card"), ProtocolError);

  EndpointCard one_way = card;
  one_way.directional = false;
  one_way.names.resize(2);
  try {
    transport::net::check_compatible(card, one_way, 0, 1);
    ADD_FAILURE() << "a directional card and a one-way card were accepted together";
  } catch (const InvalidArgument& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("rank 0 -> peer 1"), std::string::npos) << text;
    EXPECT_NE(text.find("direction"), std::string::npos) << text;
  }
}

/// Runs the child program `args(rank)` as ranks 0 and 1, each in side `rank` of `pair` (the store on side 0), with
/// `net` and PICKLE_NET_IFACE=iface(rank), and expects both to exit 0 within `limit`.
void expect_ranks_ok_in_namespaces(const NetnsPair& pair, const std::vector<std::string>& net,
                                   const std::function<std::string(int)>& iface,
                                   const std::function<std::vector<std::string>(int)>& args,
                                   std::chrono::seconds limit) {
  const int port = free_tcp_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = rank_env(rank, 2, port);
    env.push_back("MASTER_ADDR=" + pair.address(0));
    for (const auto& entry : net) env.push_back(entry);
    env.push_back("PICKLE_NET_IFACE=" + iface(rank));
    std::vector<std::string> command = {self_exe(), "--pickle-child"};
    for (const auto& arg : args(rank)) command.push_back(arg);
    pids.push_back(spawn_program(pair.exec_in(rank, command), env));
  }
  for (int rank = 0; rank < 2; ++rank) {
    auto status = wait_pid_or_kill(pids[rank], limit);
    EXPECT_TRUE(status.ok()) << "rank " << rank << " " << status.describe();
  }
}

TEST(NetTransportNamespaces, ExactDataBetweenNamespacesOverAnImpairedLink) {
  std::string why_not;
  auto pair = NetnsPair::create(&why_not);
  if (!pair) GTEST_SKIP() << why_not;
  std::cout << "link impairment: " << pair->impairment() << std::endl;
  expect_ranks_ok_in_namespaces(
      *pair, net_env(4, 262144, 40), [&](int rank) { return pair->iface(rank); },
      [](int) { return std::vector<std::string>{"net_exchange", "0,1,4097,262143,262144,262145,1048577,4194304", "2"}; },
      std::chrono::seconds(90));
  std::cout << "packets dropped by the impairment: " << pair->drops() << std::endl;
}

// A wrong interface: rank 1 publishes endpoints on its namespace's loopback, which rank 0 (in the other namespace)
// cannot reach, and its own connections to rank 0 cannot leave from a loopback address. Each lane connects at
// set-up (a handshake write), so both ranks fail there, naming the peer, within PICKLE_TIMEOUT: no transport that
// looks fine and then fails (or retries for good) at its first transfer.
TEST(NetTransportNamespaces, APeerWhoseEndpointsCannotBeReachedFailsSetUp) {
  std::string why_not;
  auto pair = NetnsPair::create(&why_not, /*impaired=*/false);
  if (!pair) GTEST_SKIP() << why_not;
  expect_ranks_ok_in_namespaces(
      *pair, net_env(2, 65536, 5), [&](int rank) { return rank == 0 ? pair->iface(0) : std::string("lo"); },
      [](int rank) { return std::vector<std::string>{"net_setup_unreachable", std::to_string(1 - rank)}; },
      std::chrono::seconds(60));
}

#endif  // PICKLE_HAVE_LIBFABRIC

}  // namespace
}  // namespace pickle::test
