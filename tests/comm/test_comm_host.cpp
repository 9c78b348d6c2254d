// The communicator on host memory across real processes: the same rank programs as the GPU tests.
#include <gtest/gtest.h>

#include "subprocess.hpp"

namespace pickle::test {
namespace {

void expect_all_ok(const std::vector<ExitStatus>& statuses) {
  for (std::size_t rank = 0; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}

class CommSizes : public testing::TestWithParam<int> {};
TEST_P(CommSizes, RingOfSendsFromOneByteTo64MiBArrivesIntact) {
  expect_all_ok(run_ranks("comm_sizes", GetParam(), {"host", std::to_string(64u << 20)}, {"PICKLE_TIMEOUT=60"},
                          std::chrono::seconds(120)));
}
INSTANTIATE_TEST_SUITE_P(Comm, CommSizes, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

TEST(Comm, HundredsOfTaggedMessagesInShuffledOrderBothWays) {
  expect_all_ok(run_ranks("comm_many_tags", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, SendsTakingTurnsOverTwoCopyStreamsArriveIntact) {
  expect_all_ok(run_ranks("comm_sizes", 3, {"host", std::to_string(4u << 20)},
                          {"PICKLE_TIMEOUT=60", "PICKLE_IPC_STREAMS=2"}));
  expect_all_ok(run_ranks("comm_many_tags", 2, {"host"}, {"PICKLE_TIMEOUT=60", "PICKLE_IPC_STREAMS=2"}));
}

TEST(Comm, SecondTransferToAnAllocationOpensNothing) {
  expect_all_ok(run_ranks("comm_cache", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, PutSignalWaitThroughAWindow) {
  expect_all_ok(run_ranks("comm_put_signal", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, BadInputAndSizeMismatchAreClearErrors) {
  expect_all_ok(run_ranks("comm_errors", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, PeerKilledMidTransferFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"host"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

TEST(Comm, TwoCommunicatorsOfTheSameRanksKeepTheirTrafficApart) {
  expect_all_ok(run_ranks("comm_two_communicators", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, CopiesQueuedIntoAPeerThatDiesRunSafely) {
  auto statuses = run_ranks("comm_copy_into_dead_peer", 2, {}, {"PICKLE_TIMEOUT=30"});
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
}

TEST(Comm, ARankUnwindingFromAnErrorFailsItsPeersPendingOperationsAtOnce) {
  expect_all_ok(run_ranks("comm_unwind", 2, {"host"}, {"PICKLE_TIMEOUT=20"}));
}

TEST(Comm, StreamWaitingOnADeadPeersSignalIsReleased) {
  auto statuses = run_ranks("comm_signal_dead_peer", 2, {"host"}, {"PICKLE_TIMEOUT=20"});
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
}

TEST(Comm, MoreReceivesThanCompletionSlotsReuseThemSafely) {
  expect_all_ok(run_ranks("comm_slot_reuse", 2, {"host"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(120)));
}

TEST(Comm, RecvWithoutASenderTimesOut) {
  expect_all_ok(run_ranks("comm_timeout", 2, {"host"}, {"PICKLE_TIMEOUT=1"}));
}

}  // namespace
}  // namespace pickle::test
