// The communicator on host memory across real processes: the same rank programs as the GPU tests.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <thread>

#include <pickle/communicator.hpp>

#include "rank_statuses.hpp"
#include "subprocess.hpp"
#include "thread_ranks.hpp"

namespace pickle::test {
namespace {

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

// The programs around a full stream (tests/comm/full_stream_children.cpp) over ipc, the transport of host ranks on one
// host. When every pair used ipc, the progress thread queued the sends it matched itself, and a copy stream full
// behind a gate held it: it stopped reading its channels. With 1000 late sends the peer's posts that were left then
// filled the channel, and the peer never got to the signal that opens the gate (with 885ad94's src/comm both
// SendsMatchedLate runs hang; with 500 the posts left fit in the socket and the peer went on); with three ranks the
// third one's message never went out.
TEST(Comm, ASendOnAStreamFullOfSignalsBehindAGateGoesOut) {
  for (const char* when : {"posted", "late"}) {
    SCOPED_TRACE(when);
    TempDir folder("full-stream");
    expect_all_ok(run_ranks("comm_send_on_a_full_stream", 2, {"host", folder.str(), when}, {"PICKLE_TIMEOUT=60"}));
  }
}
TEST(Comm, SendsMatchedLateBehindAGateAllGoOut) {
  for (const char* streams : {"1", "2"}) {
    SCOPED_TRACE(streams);
    // At most about 1020: the gated stream holds the gate and an event record per send, and a full one would hold
    // the sender's own thread (a CUDA stream's queue takes about as many).
    expect_all_ok(run_ranks("comm_sends_matched_late_behind_a_gate", 2, {"host", "1000"},
                            {"PICKLE_TIMEOUT=60", std::string("PICKLE_IPC_STREAMS=") + streams}));
  }
}
TEST(Comm, LateMatchesOfAHeldPairDoNotHoldUpAnother) {
  expect_all_ok(run_ranks("comm_late_matches_of_a_held_pair_do_not_hold_another", 3, {"host", "500"},
                          {"PICKLE_TIMEOUT=60"}));
}

// Rank 0 destroys its communicator while its late-matched sends to rank 1 wait to be queued on a full copy stream
// behind a gate that rank 1, still busy, never opens: joining the thread that queues them waited for ever, since the
// gate was released only after it (with 4e8d933's src/comm the ranks are still running at the test's deadline).
TEST(Comm, TeardownWithLateMatchesBehindAGateThatNeverOpensEnds) {
  TempDir folder("closed-gate");
  expect_all_ok(run_ranks("comm_teardown_with_late_matches_behind_a_closed_gate", 2, {"host", folder.str(), "1000"},
                          {"PICKLE_TIMEOUT=5"}, std::chrono::seconds(90)));
}

// A peer stopped mid-transfer holds up no other pair (ipc copies need nothing of the stopped peer's CPU).
TEST(Comm, AStoppedPeerHoldsUpNoOtherPair) {
  expect_all_ok(run_ranks("comm_a_stopped_peer_holds_up_no_other_pair", 3, {"host", std::to_string(16u << 20)},
                          {"PICKLE_TIMEOUT=20"}, std::chrono::seconds(90)));
}

TEST(Comm, SecondTransferToAnAllocationOpensNothing) {
  expect_all_ok(run_ranks("comm_cache", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, AMappingReleasedWhileAStreamWaitsForThePeerDoesNotHoldUpTheNextPost) {
  expect_all_ok(run_ranks("comm_release_while_a_stream_waits", 2, {"host"}, {"PICKLE_TIMEOUT=30"}));
}
TEST(Comm, FreedReceiveBuffersAreUnmappedByTheSender) {
  expect_all_ok(run_ranks("comm_cache_release", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, PutSignalWaitThroughAWindow) {
  expect_all_ok(run_ranks("comm_put_signal", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, APutAndSignalHeldByTheirStreamDoNotHoldUpALaterSend) {
  expect_all_ok(run_ranks("comm_put_held_by_stream", 2, {"host"}, {"PICKLE_TIMEOUT=15"}));
}

TEST(Comm, ASignalWaitsOnlyForThePutsOfItsOwnStream) {
  expect_all_ok(run_ranks("comm_signal_independent_of_other_streams", 2, {"host"}, {"PICKLE_TIMEOUT=15"}));
}

TEST(Comm, TwoCommunicatorsReceiveIntoOneAllocation) {
  expect_all_ok(run_ranks("comm_two_communicators_one_allocation", 2, {"host"}, {"PICKLE_TIMEOUT=30"}));
}

TEST(Comm, ThousandsOfSmallPutsLandInPlace) {
  expect_all_ok(run_ranks("comm_put_many", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, BadInputAndSizeMismatchAreClearErrors) {
  expect_all_ok(run_ranks("comm_errors", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}

TEST(Comm, ASendWhoseStreamRefusesItsCopyFailsTheReceiveAsThePeersFailure) {
  expect_all_ok(run_ranks("comm_send_on_a_refusing_stream", 2, {"host", "pair-goes-on"}, {"PICKLE_TIMEOUT=60"}));
}
TEST(Comm, ASendWhoseStreamRefusesItsPointThrowsAndSendsNothing) {
  expect_all_ok(run_ranks("comm_send_on_a_refusing_stream_late", 2, {"host", "throws"}, {"PICKLE_TIMEOUT=60"}));
}
TEST(Comm, ASendWhosePointItsStreamDroppedFailsAloneAndLaterSendsGoThrough) {
  expect_all_ok(run_ranks("comm_send_whose_point_its_stream_dropped", 2, {"host"}, {"PICKLE_TIMEOUT=60"}));
}
// The copy and its completion write are queued on the caller's stream (one copy stream per peer) or on the pair's
// copy streams (two), and then dropped unrun: before, both sides waited PICKLE_TIMEOUT for a completion word that
// nothing would write.
TEST(Comm, SendsTheirStreamDroppedUnrunFailPromptlyOnBothSides) {
  for (const char* streams : {"1", "2"}) {
    SCOPED_TRACE(streams);
    expect_all_ok(run_ranks("comm_sends_their_stream_dropped_unrun", 2, {"host"},
                            {"PICKLE_TIMEOUT=60", std::string("PICKLE_IPC_STREAMS=") + streams}));
  }
}

TEST(Comm, PeerKilledMidTransferFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"host"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST(Comm, APeerKilledMidTransferIsReportedOnAStreamThatWaitsForItsReceives) {
  auto statuses =
      run_ranks("comm_peer_death_seen_on_a_stream", 2, {"host"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
// The checks that on_stream left on a stream run after the communicator is gone: a receive that failed alone
// reports its own error there, and completed requests report nothing.
TEST(Comm, AStreamSynchronizedAfterItsCommunicatorReportsWhatItsRequestsDid) {
  for (const char* what_ran : {"mismatch", "mismatch_at_close", "completed"}) {
    SCOPED_TRACE(what_ran);
    expect_all_ok(
        run_ranks("comm_stream_synchronized_after_its_communicator", 2, {"host", what_ran}, {"PICKLE_TIMEOUT=30"}));
  }
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

TEST(Comm, TeardownDoesNotWaitForAStreamHoldingAWait) {
  expect_all_ok(run_ranks("comm_teardown_with_a_pending_wait", 2, {"host"}, {"PICKLE_TIMEOUT=10"}));
}

// A communicator destroyed before a stream that waits on its words was synchronized: the stream must not read freed
// memory (a SIGSEGV of rank 1 before the fix) nor hang, and its synchronize reports a wait that never completed
// (PeerError naming it) or passes one that did. "gated": the stream reaches the wait only after the teardown;
// "unwinding": no goodbye from the peer, the teardown itself releases the wait.
class CommDestroyedWhileAStreamWaits : public testing::TestWithParam<std::string> {
 protected:
  void run(const std::string& what_waits, const std::vector<std::string>& options) {
    std::vector<std::string> args{"host", what_waits};
    args.insert(args.end(), options.begin(), options.end());
    expect_all_ok(run_ranks("comm_destroyed_while_a_stream_waits", 2, args,
                            {"PICKLE_TIMEOUT=10", "PICKLE_TRANSPORT=" + GetParam()}, std::chrono::seconds(60)));
  }
  const std::vector<std::vector<std::string>> variants_{{}, {"gated"}, {"unwinding"}, {"gated", "unwinding"}};
};
TEST_P(CommDestroyedWhileAStreamWaits, OnAReceiveThatNeverCameTheStreamReportsIt) {
  for (const auto& options : variants_) {
    SCOPED_TRACE(testing::PrintToString(options));
    run("recv", options);
  }
}
TEST_P(CommDestroyedWhileAStreamWaits, OnASignalThatNeverCameTheStreamReportsIt) {
  for (const auto& options : variants_) {
    SCOPED_TRACE(testing::PrintToString(options));
    run("signal", options);
  }
}
TEST_P(CommDestroyedWhileAStreamWaits, BeforeReachingAReceiveThatCompletedTheStreamStillPassesIt) {
  run("recv_done", {"gated"});
}
INSTANTIATE_TEST_SUITE_P(Comm, CommDestroyedWhileAStreamWaits, testing::Values("ipc", "shm"),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(Comm, StreamWaitingOnADeadPeersSignalIsReleased) {
  auto statuses = run_ranks("comm_signal_dead_peer", 2, {"host"}, {"PICKLE_TIMEOUT=20"});
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
}

// A wait for a value the peer raised before it died, reached by the stream only after the death: it passes.
TEST(Comm, AWaitForASignalRaisedBeforeThePeerDiedPassesAfterTheRelease) {
  auto statuses = run_ranks("comm_signal_reached_before_a_peer_died", 2, {"host"}, {"PICKLE_TIMEOUT=20"},
                            std::chrono::seconds(60));
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
}

TEST(Comm, MoreReceivesThanCompletionSlotsReuseThemSafely) {
  expect_all_ok(run_ranks("comm_slot_reuse", 2, {"host"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(120)));
}

// Ranks as threads of one process (how the latency probe runs two ranks in one CUDA context): each makes its
// communicator at the same time, so neither may hold a process-wide lock while its store waits for the other.
TEST(Comm, RanksAsThreadsOfOneProcessExchangeData) {
  const int port = free_tcp_port();
  constexpr std::size_t kBytes = (1u << 20) + 3;
  std::exception_ptr errors[2];
  std::vector<unsigned char> received[2];
  auto rank_main = [&](int rank) {
    try {
      Communicator::Options options;
      options.rank_info = thread_rank_info(rank, 2, port);
      options.memory = MemoryKind::Host;
      options.timeout_seconds = 20;
      Communicator comm(options);
      Buffer send = comm.alloc(kBytes), recv = comm.alloc(kBytes);
      auto* bytes = static_cast<unsigned char*>(send.data());
      for (std::size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + rank * 131);
      Request r = comm.recv(1 - rank, 3, recv.data(), kBytes);
      comm.send(1 - rank, 3, send.data(), kBytes).wait();
      r.wait();
      auto* in = static_cast<unsigned char*>(recv.data());
      received[rank].assign(in, in + kBytes);
    } catch (...) {
      errors[rank] = std::current_exception();
    }
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  for (int rank = 0; rank < 2; ++rank) {
    if (!errors[rank]) continue;
    try {
      std::rethrow_exception(errors[rank]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank << ": " << e.what();
    }
  }
  for (int rank = 0; rank < 2 && !HasFailure(); ++rank) {
    ASSERT_EQ(received[rank].size(), kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) {
      ASSERT_EQ(received[rank][i], static_cast<unsigned char>(i * 7 + (1 - rank) * 131)) << "rank " << rank << " byte " << i;
    }
  }
}

TEST(Comm, PostedReceivesCountsThePeersUnmatchedPosts) {
  expect_all_ok(run_ranks("comm_posted_receives", 2, {"host"}, {"PICKLE_TIMEOUT=30"}));
}

TEST(Comm, SourceReusedAfterASendsOnStreamKeepsWhatWasSent) {
  expect_all_ok(run_ranks("comm_send_on_stream_then_reuse", 2, {"host"}, {"PICKLE_TIMEOUT=30"}));
}

TEST(Comm, BackToBackSendsOnAStreamArriveAndCompleteByItsSynchronize) {
  // Host memory writes every completion on the copy's stream, lanes asked for or not (completion_lanes.hpp).
  expect_all_ok(run_ranks("comm_burst_completion_lanes", 2, {"host", "none"},
                          {"PICKLE_TIMEOUT=30", "PICKLE_IPC_COMPLETION=lanes"}));
}

TEST(Comm, RecvWithoutASenderTimesOut) {
  // 3 s, not 1: the one timeout also bounds the set-up and the final barrier, which a loaded 2-core machine slows.
  expect_all_ok(run_ranks("comm_timeout", 2, {"host"}, {"PICKLE_TIMEOUT=3"}));
}

}  // namespace
}  // namespace pickle::test
