// The communicator over the net transport (libfabric's tcp provider on loopback; PICKLE_TRANSPORT=net forces it
// between host ranks of one machine): the rank programs of tests/comm, with small chunks and 1-4 lanes. Skipped, with
// the reason, in a build without libfabric.
#include <gtest/gtest.h>

#include "subprocess.hpp"

namespace pickle::test {
namespace {

std::vector<std::string> net_env(int lanes) {
  return {"PICKLE_TIMEOUT=60", "PICKLE_TRANSPORT=net", "PICKLE_NET_IFACE=lo", "PICKLE_NET_CHUNK=65536",
          "PICKLE_NET_LANES=" + std::to_string(lanes)};
}

class Net : public testing::Test {
 protected:
  void SetUp() override {
#ifndef PICKLE_HAVE_LIBFABRIC
    GTEST_SKIP() << "built without libfabric (apt-get install libfabric-dev, then reconfigure)";
#endif
  }
  static void expect_all_ok(const std::vector<ExitStatus>& statuses) {
    for (std::size_t rank = 0; rank < statuses.size(); ++rank) {
      EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
    }
  }
};

TEST_F(Net, RingOfSendsFromOneByteTo16MiBArrivesIntactOver1To4Lanes) {
  for (int lanes : {1, 4}) {
    SCOPED_TRACE(lanes);
    expect_all_ok(run_ranks("comm_sizes", 3, {"host", std::to_string(16u << 20)}, net_env(lanes),
                            std::chrono::seconds(120)));
  }
}
TEST_F(Net, MessagesAroundChunkBoundariesArriveIntact) {
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    expect_all_ok(run_ranks("shm_boundaries", ranks, {"host", "net"}, net_env(3)));
  }
}
TEST_F(Net, HundredsOfTaggedMessagesInShuffledOrderBothWays) {
  expect_all_ok(run_ranks("comm_many_tags", 2, {"host"}, net_env(2)));
}
TEST_F(Net, PutSignalWaitThroughAWindow) { expect_all_ok(run_ranks("comm_put_signal", 2, {"host"}, net_env(3))); }
TEST_F(Net, BadInputAndSizeMismatchAreClearErrors) { expect_all_ok(run_ranks("comm_errors", 2, {"host"}, net_env(2))); }
TEST_F(Net, MoreReceivesThanCompletionSlotsReuseThemSafely) {
  expect_all_ok(run_ranks("comm_slot_reuse", 2, {"host"}, net_env(2), std::chrono::seconds(120)));
}
TEST_F(Net, PeerKilledMidTransferFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"host"}, net_env(2), std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

}  // namespace
}  // namespace pickle::test
