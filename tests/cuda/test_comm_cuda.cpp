// The communicator on 2 GPUs in 2 processes: the rank programs of tests/comm with CUDA memory. The data moves by
// copy engines straight into the peer GPU's memory; completions are stream write-values.
#include <gtest/gtest.h>

#include "two_gpus.hpp"

namespace pickle::test {
namespace {

class CommCuda : public TwoGpuTest {};

TEST_F(CommCuda, SendsFromOneByteTo1GiBBothWaysArriveIntact) {
  expect_all_ok(run_ranks("comm_sizes", 2, {"cuda", std::to_string(1u << 30)}, {"PICKLE_TIMEOUT=60"},
                          std::chrono::seconds(240)));
}
TEST_F(CommCuda, HundredsOfTaggedMessagesInShuffledOrderBothWays) {
  expect_all_ok(run_ranks("comm_many_tags", 2, {"cuda"}, {"PICKLE_TIMEOUT=60"}));
}
// Late-matched ipc sends behind a gate fill their copy stream: the progress thread must not be the one that waits
// for it (it would stop reading the channels that bring the gate's opening).
TEST_F(CommCuda, SendsMatchedLateBehindAGateAllGoOut) {
  expect_all_ok(run_ranks("comm_sends_matched_late_behind_a_gate", 2, {"cuda", "1000"}, {"PICKLE_TIMEOUT=60"},
                          std::chrono::seconds(90)));
}
TEST_F(CommCuda, LateMatchesOfAHeldPairDoNotHoldUpAnother) {
  expect_all_ok(run_ranks("comm_late_matches_of_a_held_pair_do_not_hold_another", 3, {"cuda", "500"},
                          {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(90)));
}
// Teardown while late-matched sends wait to be queued on a full copy stream behind a gate that the peer, still busy,
// never opens: the gate is released before the thread that queues them is joined.
TEST_F(CommCuda, TeardownWithLateMatchesBehindAGateThatNeverOpensEnds) {
  TempDir folder("closed-gate");
  expect_all_ok(run_ranks("comm_teardown_with_late_matches_behind_a_closed_gate", 2, {"cuda", folder.str(), "1000"},
                          {"PICKLE_TIMEOUT=5"}, std::chrono::seconds(90)));
}
TEST_F(CommCuda, BufferInsideALargerVmmAllocationOpensOnce) {
  expect_all_ok(run_ranks("comm_cache", 2, {"cuda", "vmm"}, {"PICKLE_TIMEOUT=60"}));
}
TEST_F(CommCuda, BufferInsideALargerCudaMallocAllocationOpensOnce) {
  expect_all_ok(run_ranks("comm_cache", 2, {"cuda", "cudaMalloc"}, {"PICKLE_TIMEOUT=60"}));
}
TEST_F(CommCuda, FreedVmmReceiveBuffersAreUnmappedByTheSender) {
  expect_all_ok(run_ranks("comm_cache_release", 2, {"cuda", "vmm"}, {"PICKLE_TIMEOUT=60"}));
}
TEST_F(CommCuda, FreedCudaMallocReceiveBuffersAreUnmappedByTheSender) {
  expect_all_ok(run_ranks("comm_cache_release", 2, {"cuda", "cudaMalloc"}, {"PICKLE_TIMEOUT=60"}));
}
// Closing a released VMM mapping waits for the whole device: not on the progress thread, where a stream held on the
// peer's signal held up the post that the peer needed to raise it. (A cudaMalloc allocation's handle is still closed
// there: a known gap, docs/device.md.)
TEST_F(CommCuda, AMappingReleasedWhileAStreamWaitsForThePeerDoesNotHoldUpTheNextPost) {
  expect_all_ok(run_ranks("comm_release_while_a_stream_waits", 2, {"cuda", "vmm"}, {"PICKLE_TIMEOUT=30"},
                          std::chrono::seconds(120)));
}
TEST_F(CommCuda, TwoCommunicatorsReceiveIntoOneCudaMallocAllocation) {
  expect_all_ok(run_ranks("comm_two_communicators_one_allocation", 2, {"cuda", "cudaMalloc"}, {"PICKLE_TIMEOUT=30"}));
}
TEST_F(CommCuda, TwoCommunicatorsReceiveIntoOneVmmAllocation) {
  expect_all_ok(run_ranks("comm_two_communicators_one_allocation", 2, {"cuda", "vmm"}, {"PICKLE_TIMEOUT=30"}));
}
TEST_F(CommCuda, SendsMatchedAtCallTimeArriveIntact) {
  expect_all_ok(run_ranks("comm_posted_receives", 2, {"cuda"}, {"PICKLE_TIMEOUT=30"}));
}
TEST_F(CommCuda, SourceReusedAfterASendsOnStreamKeepsWhatWasSent) {
  expect_all_ok(run_ranks("comm_send_on_stream_then_reuse", 2, {"cuda"}, {"PICKLE_TIMEOUT=30"}));
}
TEST_F(CommCuda, BackToBackSendsWriteTheirCompletionsOnALaneAndAPingPongDoesNot) {
  // The default (PICKLE_IPC_COMPLETION unset: lanes).
  expect_all_ok(run_ranks("comm_burst_completion_lanes", 2, {"cuda", "all-but-the-first"}, {"PICKLE_TIMEOUT=30"}));
}
TEST_F(CommCuda, BackToBackSendsWithTheirCompletionsOnTheStreamArriveIntact) {
  expect_all_ok(run_ranks("comm_burst_completion_lanes", 2, {"cuda", "none"},
                          {"PICKLE_TIMEOUT=30", "PICKLE_IPC_COMPLETION=stream"}));
}
TEST_F(CommCuda, PutSignalWaitThroughAWindow) {
  expect_all_ok(run_ranks("comm_put_signal", 2, {"cuda"}, {"PICKLE_TIMEOUT=60"}));
}
TEST_F(CommCuda, BadInputAndSizeMismatchAreClearErrors) {
  expect_all_ok(run_ranks("comm_errors", 2, {"cuda"}, {"PICKLE_TIMEOUT=60"}));
}
TEST_F(CommCuda, PeerKilledMidTransferFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"cuda"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(CommCuda, APeerKilledMidTransferIsReportedOnAStreamThatWaitsForItsReceives) {
  auto statuses =
      run_ranks("comm_peer_death_seen_on_a_stream", 2, {"cuda"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(CommCuda, ARankUnwindingFromAnErrorFailsItsPeersPendingOperationsAtOnce) {
  expect_all_ok(run_ranks("comm_unwind", 2, {"cuda"}, {"PICKLE_TIMEOUT=20"}));
}
TEST_F(CommCuda, StreamWaitingOnADeadPeersSignalIsReleased) {
  auto statuses = run_ranks("comm_signal_dead_peer", 2, {"cuda"}, {"PICKLE_TIMEOUT=20"});
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
}
// A communicator destroyed while a GPU stream still waits on one of its words (tests/comm's
// CommDestroyedWhileAStreamWaits; no gate here, which needs a host stream): the wait is released and reported on the
// stream, and the words stay registered while the GPU may still read them (no fault).
TEST_F(CommCuda, DestroyedWhileAStreamWaitsTheStreamReportsIt) {
  for (const char* what : {"recv", "signal"}) {
    for (const char* option : {"", "unwinding"}) {
      SCOPED_TRACE(testing::Message() << what << " " << option);
      expect_all_ok(run_ranks("comm_destroyed_while_a_stream_waits", 2, {"cuda", what, option}, {"PICKLE_TIMEOUT=10"},
                              std::chrono::seconds(60)));
    }
  }
}
TEST_F(CommCuda, RecvWithoutASenderTimesOut) {
  expect_all_ok(run_ranks("comm_timeout", 2, {"cuda"}, {"PICKLE_TIMEOUT=2"}));
}

}  // namespace
}  // namespace pickle::test
