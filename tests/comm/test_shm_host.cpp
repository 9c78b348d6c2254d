// The shm transport on host memory across real processes (PICKLE_TRANSPORT=shm forces it between host ranks, which
// would otherwise map each other's memory directly), with small chunks so that every size crosses many chunk
// boundaries; and the choice of transport. The same rank programs run on GPUs in tests/cuda.
#include <gtest/gtest.h>

#include "rank_statuses.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::vector<std::string> kShm = {"PICKLE_TIMEOUT=60", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=65536",
                                       "PICKLE_SHM_SLOTS=3"};

class ShmRanks : public testing::TestWithParam<int> {};
TEST_P(ShmRanks, MessagesAroundChunkBoundariesArriveIntact) {
  expect_all_ok(run_ranks("shm_boundaries", GetParam(), {"host"}, kShm));
}
TEST_P(ShmRanks, RingOfSendsFromOneByteTo16MiBArrivesIntact) {
  expect_all_ok(run_ranks("comm_sizes", GetParam(), {"host", std::to_string(16u << 20)}, kShm, std::chrono::seconds(120)));
}
INSTANTIATE_TEST_SUITE_P(Shm, ShmRanks, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

TEST(Shm, TwoSlotRingWithPageSizedChunks) {
  expect_all_ok(run_ranks("shm_boundaries", 2, {"host"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096", "PICKLE_SHM_SLOTS=2"}));
}

TEST(Shm, HundredsOfTaggedMessagesInShuffledOrderBothWays) {
  expect_all_ok(run_ranks("comm_many_tags", 2, {"host"}, kShm));
}

// One send worker for every pair waited on the stopped peer's full stream, and rank 2's message never went out.
TEST(Shm, AStoppedPeerHoldsUpNoOtherPair) {
  // Page-sized chunks: a message of 4096 chunks is 12288 stream operations, far more than a stream's queue holds.
  // Rank 2's receive gave up after PICKLE_TIMEOUT.
  expect_all_ok(run_ranks("comm_a_stopped_peer_holds_up_no_other_pair", 3, {"host", std::to_string(16u << 20)},
                          {"PICKLE_TIMEOUT=20", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096", "PICKLE_SHM_SLOTS=2"},
                          std::chrono::seconds(90)));
}

// Rank 0 destroys its communicator while its sends wait behind a gate that rank 1, still busy, never opens: the
// release of the gate must not let rank 1 take the ring's stale slots for its messages (it did, with 550aafe).
TEST(Shm, TeardownWithSendsBehindAGateThatNeverOpensGivesThePeerNoGarbage) {
  TempDir folder("closed-gate");
  expect_all_ok(run_ranks("comm_teardown_with_late_matches_behind_a_closed_gate", 2, {"host", folder.str(), "100"},
                          {"PICKLE_TIMEOUT=5", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096", "PICKLE_SHM_SLOTS=2"},
                          std::chrono::seconds(90)));
}
// A communicator destroyed while its peer is stopped mid-transfer: the teardown ends (the peer is resumed only then).
TEST(Shm, TeardownWhileAPeerIsStoppedMidTransferEnds) {
  expect_all_ok(run_ranks("comm_teardown_while_a_peer_is_stopped", 2, {"host", std::to_string(16u << 20)},
                          {"PICKLE_TIMEOUT=5", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096", "PICKLE_SHM_SLOTS=2"},
                          std::chrono::seconds(90)));
}

// Rank 0 fails the pair while rank 1 is stopped with a receive under way (rank 1 stopped reading its control channel
// for PICKLE_TIMEOUT), reuses the send's buffer and resumes rank 1: the receive fails or holds the message (before, it
// completed with the ring's stale slots).
TEST(Shm, APeerResumedAfterItsPairFailedTakesNoStaleBytes) {
  // 256 KiB: 64 chunks, all queued before the failure; 1 MiB: more than a worker queues ahead (128), so the rest
  // never comes. Looked at at once, and once the ring let the stale bytes through.
  for (unsigned bytes : {256u << 10, 1u << 20}) {
    for (const char* look_after_ms : {"0", "500"}) {
      TempDir folder("resumed-after-failure");
      expect_all_ok(run_ranks("comm_a_peer_resumed_after_its_pair_failed_takes_no_stale_bytes", 2,
                              {"host", std::to_string(bytes), folder.str(), look_after_ms},
                              {"PICKLE_TIMEOUT=3", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096",
                               "PICKLE_SHM_SLOTS=2"},
                              std::chrono::seconds(90)));
    }
  }
}

// The same, with the receive looked at only through a stream that waits for it (Request::on_stream), as a kernel
// that consumes the message would: the stream's synchronize throws the receive's failure.
TEST(Shm, AStreamThatWaitsForAReceiveFromAPeerThatGaveUpThrowsAtSynchronize) {
  for (unsigned bytes : {256u << 10, 1u << 20}) {
    TempDir folder("resumed-after-failure-stream");
    expect_all_ok(run_ranks("comm_a_peer_resumed_after_its_pair_failed_takes_no_stale_bytes", 2,
                            {"host", std::to_string(bytes), folder.str(), "0", "stream"},
                            {"PICKLE_TIMEOUT=3", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096", "PICKLE_SHM_SLOTS=2"},
                            std::chrono::seconds(90)));
  }
}

TEST(Shm, PutSignalWaitThroughAWindow) { expect_all_ok(run_ranks("comm_put_signal", 2, {"host"}, kShm)); }

TEST(Shm, APutAndSignalHeldByTheirStreamDoNotHoldUpALaterSend) {
  auto env = kShm;
  env[0] = "PICKLE_TIMEOUT=15";  // the deadlock this guards against lasted until the timeout
  expect_all_ok(run_ranks("comm_put_held_by_stream", 2, {"host"}, env));
}

TEST(Shm, ASignalWaitsOnlyForThePutsOfItsOwnStream) {
  auto env = kShm;
  env[0] = "PICKLE_TIMEOUT=15";
  expect_all_ok(run_ranks("comm_signal_independent_of_other_streams", 2, {"host"}, env));
}

TEST(Shm, MorePutsThanPutWordsReuseThemInTurn) {
  expect_all_ok(run_ranks("comm_put_many", 2, {"host"}, kShm));
}

TEST(Shm, BadInputAndSizeMismatchAreClearErrors) { expect_all_ok(run_ranks("comm_errors", 2, {"host"}, kShm)); }
TEST(Shm, ASendWhoseStreamRefusesItsCopyFailsTheReceiveAsThePeersFailure) {
  expect_all_ok(run_ranks("comm_send_on_a_refusing_stream", 2, {"host", "pair-goes-on"}, kShm));
}
TEST(Shm, ASendWhoseStreamRefusesItsCallbackFailsTheReceivePostedAfterIt) {
  expect_all_ok(run_ranks("comm_send_on_a_refusing_stream_late", 2, {"host", "fails"}, kShm));
}
TEST(Shm, ASendWhosePointItsStreamDroppedFailsAloneAndLaterSendsGoThrough) {
  expect_all_ok(run_ranks("comm_send_whose_point_its_stream_dropped", 2, {"host"}, kShm));
}
TEST(Shm, SendsTheirStreamDroppedUnrunFailPromptlyOnBothSides) {
  expect_all_ok(run_ranks("comm_sends_their_stream_dropped_unrun", 2, {"host"}, kShm));
}

TEST(Shm, MoreReceivesThanCompletionSlotsReuseThemSafely) {
  expect_all_ok(run_ranks("comm_slot_reuse", 2, {"host"}, kShm, std::chrono::seconds(120)));
}

TEST(Shm, PeerKilledMidPipelineFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"host"}, kShm, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST(Shm, APeerKilledMidTransferIsReportedOnAStreamThatWaitsForItsReceives) {
  auto statuses = run_ranks("comm_peer_death_seen_on_a_stream", 2, {"host"}, kShm, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
// The checks that on_stream left on a stream run after the communicator is gone: a receive that failed alone
// reports its own error there, and completed requests report nothing.
TEST(Shm, AStreamSynchronizedAfterItsCommunicatorReportsWhatItsRequestsDid) {
  for (const char* what_ran : {"mismatch", "mismatch_at_close", "completed"}) {
    SCOPED_TRACE(what_ran);
    expect_all_ok(run_ranks("comm_stream_synchronized_after_its_communicator", 2, {"host", what_ran}, kShm));
  }
}

// The sender dies while its copies into the ring are still queued: the receive fails rather than completing with
// what the released ring held.
TEST(Shm, SenderKilledMidCopyFailsTheReceiveRatherThanCompletingIt) {
  auto statuses = run_ranks("shm_sender_dies_mid_copy", 2, {"host"},
                            {"PICKLE_TIMEOUT=20", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096", "PICKLE_SHM_SLOTS=2"},
                            std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

TEST(Shm, StreamWaitingOnADeadPeersSignalIsReleased) {
  auto env = kShm;
  env[0] = "PICKLE_TIMEOUT=20";
  auto statuses = run_ranks("comm_signal_dead_peer", 2, {"host"}, env);
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
}

#ifndef PICKLE_HAVE_LIBFABRIC
TEST(Transport, ForcingATransportThisBuildLacksIsAClearError) {
  expect_all_ok(run_ranks("transport_refused", 2,
                          {"host", "Unavailable", "rank 0 -> peer 1: PICKLE_TRANSPORT=net cannot be used"},
                          {"PICKLE_TIMEOUT=20", "PICKLE_TRANSPORT=net"}));
}
#endif

TEST(Transport, AnUnknownTransportNameIsAClearError) {
  expect_all_ok(run_ranks("transport_refused", 2, {"host", "InvalidArgument", "PICKLE_TRANSPORT=pigeon is not a transport"},
                          {"PICKLE_TIMEOUT=20", "PICKLE_TRANSPORT=pigeon"}));
}

TEST(Transport, RanksThatChooseDifferentTransportsForAPairFail) {
  expect_all_ok(run_ranks("transport_refused", 2, {"host", "InvalidArgument", "chose another for the pair", "split"},
                          {"PICKLE_TIMEOUT=20"}));
}

}  // namespace
}  // namespace pickle::test
