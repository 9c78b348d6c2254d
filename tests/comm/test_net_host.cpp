// The communicator over the net transport (libfabric's tcp provider on loopback; PICKLE_TRANSPORT=net forces it
// between host ranks of one machine): the rank programs of tests/comm, with small chunks and 1-4 lanes. Skipped, with
// the reason, in a build without libfabric.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "../mp/netns_pair.hpp"
#include "comm_children.hpp"
#include "rank_statuses.hpp"
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
TEST_F(Net, APutAndSignalHeldByTheirStreamDoNotHoldUpALaterSend) {
  expect_all_ok(run_ranks("comm_put_held_by_stream", 2, {"host"}, net_env(2)));
}
TEST_F(Net, ASignalWaitsOnlyForThePutsOfItsOwnStream) {
  // Before: the signal waited for stream A's put, which waited for rank 1, which waited for the signal (until the
  // timeout).
  auto env = net_env(2);
  env[0] = "PICKLE_TIMEOUT=15";
  expect_all_ok(run_ranks("comm_signal_independent_of_other_streams", 2, {"host"}, env));
}
TEST_F(Net, FreedReceiveBuffersAreDeregistered) {
  expect_all_ok(run_ranks("comm_net_registrations_released", 2, {"host"}, net_env(2)));
}
TEST_F(Net, FreedReceiveBuffersAreDeregisteredWhileLaterReceivesAreUnderWay) {
  expect_all_ok(run_ranks("comm_net_registrations_released_pipelined", 2, {"host"}, net_env(2)));
}
TEST_F(Net, BadInputAndSizeMismatchAreClearErrors) { expect_all_ok(run_ranks("comm_errors", 2, {"host"}, net_env(2))); }
TEST_F(Net, ASendWhoseStreamRefusesItsWritesFailsThePairOnBothSides) {
  expect_all_ok(run_ranks("comm_send_on_a_refusing_stream", 2, {"host", "pair-fails"}, net_env(2)));
}
TEST_F(Net, ASendWhoseStreamRefusesItsPointThrowsAndSendsNothing) {
  expect_all_ok(run_ranks("comm_send_on_a_refusing_stream_late", 2, {"host", "throws"}, net_env(2)));
}
TEST_F(Net, ASendWhosePointItsStreamDroppedFailsAloneAndLaterSendsGoThrough) {
  expect_all_ok(run_ranks("comm_send_whose_point_its_stream_dropped", 2, {"host"}, net_env(2)));
}
TEST_F(Net, SendsTheirStreamDroppedUnrunFailPromptlyOnBothSides) {
  expect_all_ok(run_ranks("comm_sends_their_stream_dropped_unrun", 2, {"host"}, net_env(2)));
}
TEST_F(Net, MoreReceivesThanCompletionSlotsReuseThemSafely) {
  expect_all_ok(run_ranks("comm_slot_reuse", 2, {"host"}, net_env(2), std::chrono::seconds(120)));
}
// The staged path (what GPU memory always takes: copy into a pinned buffer, RMA write from it into the receiver's
// pinned buffer, copy into place) on host memory, through the same rank programs.
std::vector<std::string> staged_env(int lanes) {
  auto env = net_env(lanes);
  env.push_back("PICKLE_NET_STAGING=1");
  return env;
}
TEST_F(Net, StagedReceivesFailedByTheirSenderGiveBackTheirBuffers) {
  expect_all_ok(run_ranks("comm_staged_receives_failed_by_their_sender_give_back_their_buffers", 2, {"host"},
                          staged_env(2)));
}
TEST_F(Net, StagedRingOfSendsFromOneByteTo16MiBArrivesIntact) {
  expect_all_ok(run_ranks("comm_sizes", 3, {"host", std::to_string(16u << 20)}, staged_env(2), std::chrono::seconds(120)));
}
TEST_F(Net, StagedMessagesAroundChunkBoundariesAndManyTagsArriveIntact) {
  expect_all_ok(run_ranks("shm_boundaries", 2, {"host", "net"}, staged_env(3)));
  expect_all_ok(run_ranks("comm_many_tags", 2, {"host"}, staged_env(2)));
}
TEST_F(Net, StagedPutSignalWaitAndErrors) {
  expect_all_ok(run_ranks("comm_put_signal", 2, {"host"}, staged_env(3)));
  expect_all_ok(run_ranks("comm_errors", 2, {"host"}, staged_env(2)));
}
// Messages past 32 MiB are cut into at most 8 pieces, each larger than the 4 MiB floor
// (comm/net_pieces.hpp), each its own message id: 32 MiB + 1 and 64 MiB arrive intact.
TEST_F(Net, StagedMessagesLargerThanEightFloorPiecesArriveIntact) {
  expect_all_ok(
      run_ranks("comm_sizes", 2, {"host", std::to_string(64u << 20)}, staged_env(2), std::chrono::seconds(120)));
}
// Sends queued behind a stream that waits for the peer all go out once it opens (host streams have no queue limit:
// the data and the protocol here; the bounded queue of a CUDA stream only NetCuda's twin shows).
TEST_F(Net, StagedSendsQueuedBehindAWaitingStreamAllGoOut) {
  expect_all_ok(run_ranks("comm_staged_sends_behind_a_waiting_stream", 2, {"host", std::to_string(1u << 20), "64"},
                          staged_env(2)));
}
// A send queued on a stream that waits, behind a gate, for the peer's signal while another thread queues signals
// on it: the data and every signal arrive. The host stream's queue fills as a CUDA stream's does
// (PICKLE_HOST_STREAM_DEPTH), so that queuing the send while holding the communicator's lock hangs here too.
TEST_F(Net, ASendOnAStreamFullOfSignalsBehindAGateGoesOut) {
  for (const char* when : {"posted", "late"}) {
    SCOPED_TRACE(when);
    TempDir direct("full-stream"), staged("full-stream-staged");
    expect_all_ok(run_ranks("comm_send_on_a_full_stream", 2, {"host", direct.str(), when}, net_env(2)));
    expect_all_ok(run_ranks("comm_send_on_a_full_stream", 2, {"host", staged.str(), when}, staged_env(2)));
  }
}
TEST_F(Net, SendsMatchedLateBehindAGateAllGoOut) {
  expect_all_ok(run_ranks("comm_sends_matched_late_behind_a_gate", 2, {"host", "500"}, net_env(2)));
  expect_all_ok(run_ranks("comm_sends_matched_late_behind_a_gate", 2, {"host", "500"}, staged_env(2)));
}
// Rank 0's late-matched sends to rank 1 fill its copy stream for rank 1 behind a gate that rank 2 opens once its own
// late-matched message arrived: one thread queuing every pair's late matches held that message behind them.
TEST_F(Net, LateMatchesOfAHeldPairDoNotHoldUpAnother) {
  expect_all_ok(run_ranks("comm_late_matches_of_a_held_pair_do_not_hold_another", 3, {"host", "500"}, net_env(2)));
  expect_all_ok(run_ranks("comm_late_matches_of_a_held_pair_do_not_hold_another", 3, {"host", "500"}, staged_env(2)));
}
// A peer stopped mid-transfer (its sockets stop draining) holds up no other pair's transfer.
TEST_F(Net, AStoppedPeerHoldsUpNoOtherPair) {
  for (auto env : {net_env(2), staged_env(2)}) {
    std::replace(env.begin(), env.end(), std::string("PICKLE_TIMEOUT=60"), std::string("PICKLE_TIMEOUT=20"));
    expect_all_ok(run_ranks("comm_a_stopped_peer_holds_up_no_other_pair", 3, {"host", std::to_string(64u << 20)},
                            env, std::chrono::seconds(90)));
  }
}
// A communicator destroyed while its peer is stopped mid-transfer (its sockets stop draining): the teardown ends.
TEST_F(Net, TeardownWhileAPeerIsStoppedMidTransferEnds) {
  for (auto env : {net_env(2), staged_env(2)}) {
    std::replace(env.begin(), env.end(), std::string("PICKLE_TIMEOUT=60"), std::string("PICKLE_TIMEOUT=5"));
    expect_all_ok(run_ranks("comm_teardown_while_a_peer_is_stopped", 2, {"host", std::to_string(64u << 20)}, env,
                            std::chrono::seconds(90)));
  }
}
// Rank 0 destroys its communicator while its late-matched sends to rank 1 wait to be queued behind a gate that
// rank 1, still busy, never opens: teardown releases the gate before it joins the thread that queues them.
TEST_F(Net, TeardownWithLateMatchesBehindAGateThatNeverOpensEnds) {
  for (auto env : {net_env(2), staged_env(2)}) {
    std::replace(env.begin(), env.end(), std::string("PICKLE_TIMEOUT=60"), std::string("PICKLE_TIMEOUT=5"));
    TempDir folder("closed-gate");
    expect_all_ok(run_ranks("comm_teardown_with_late_matches_behind_a_closed_gate", 2, {"host", folder.str(), "500"},
                            env, std::chrono::seconds(90)));
  }
}
// Receives posted while the receiver's stream waits for the sender: the protocol and the data here; the hang it
// guards against (freeing pinned memory waits for every stream of a GPU) only a GPU can show (NetCuda's twin).
TEST_F(Net, StagedReceivesPostedWhileAStreamWaitsForTheSender) {
  expect_all_ok(run_ranks("comm_staged_recv_while_a_stream_waits", 2, {"host"}, staged_env(2)));
}
// A loop of staged receives reuses its staging buffers (each goes back to the pool once copied into place) instead of
// keeping one per receive until the peer's completion slots wrap.
TEST_F(Net, StagedReceivesOneAtATimeReuseTheirStagingBuffers) {
  expect_all_ok(run_ranks("comm_staged_recv_reuse", 2, {"host"}, staged_env(2)));
}
// A receive whose staging buffer cannot be had fails alone, with its own error; the pair keeps working.
TEST_F(Net, StagedReceiveWithoutAStagingBufferFailsAloneAndThePairGoesOn) {
  expect_all_ok(run_ranks("comm_net_recv_refused", 2, {"host"}, staged_env(2)));
}
TEST_F(Net, StagedAllreduceAndPeerDeath) {
  expect_all_ok(run_ranks("comm_transport_and_allreduce", 3, {"host", "net"}, staged_env(2)));
  auto statuses = run_ranks("comm_peer_death", 2, {"host"}, staged_env(2), std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

// A process with the net transport (libfabric, and through it libinfinipath, loaded) that is sent SIGTERM ends by the
// signal, as `pickle launch` expects of a rank it stops: libinfinipath's own handler called exit() instead, and exit
// handlers running beside live threads crashed (src/transport/net/psm_signal_handlers.cpp). It says how far it got on
// a pipe, so that the signal comes after its communicator is up.
PICKLE_CHILD(net_rank_waiting_to_be_stopped) {
  const int ready_fd = std::stoi(args.at(0));
  Communicator comm = make_comm("host");
  const char byte = 1;
  if (::write(ready_fd, &byte, 1) != 1) return 3;
  for (;;) ::pause();
}
TEST_F(Net, ARankSentSigtermEndsByTheSignal) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto env = rank_env(0, 1, free_tcp_port());
  for (const auto& entry : net_env(1)) env.push_back(entry);
  Child child("net_rank_waiting_to_be_stopped", {std::to_string(fds[1])}, env);
  ::close(fds[1]);
  char byte = 0;
  const ssize_t got = ::read(fds[0], &byte, 1);
  ::close(fds[0]);
  ASSERT_EQ(got, 1) << "the rank never got its communicator up: " << child.wait(std::chrono::seconds(5)).describe();
  child.kill(SIGTERM);
  const ExitStatus status = child.wait(std::chrono::seconds(20));
  EXPECT_EQ(status.signal, SIGTERM) << status.describe();
}

TEST_F(Net, PeerKilledMidTransferFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"host"}, net_env(2), std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(Net, APeerKilledMidTransferIsReportedOnAStreamThatWaitsForItsReceives) {
  auto statuses = run_ranks("comm_peer_death_seen_on_a_stream", 2, {"host"}, net_env(2), std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
// The checks that on_stream left on a stream run after the communicator is gone: a receive that failed alone
// reports its own error there, and completed requests report nothing.
TEST_F(Net, AStreamSynchronizedAfterItsCommunicatorReportsWhatItsRequestsDid) {
  for (const char* what_ran : {"mismatch", "mismatch_at_close", "completed"}) {
    SCOPED_TRACE(what_ran);
    expect_all_ok(run_ranks("comm_stream_synchronized_after_its_communicator", 2, {"host", what_ran}, net_env(2)));
  }
}

// A receiver SIGKILLed during a burst of 4 MiB sends (the tcp provider reports nothing; the control channel closing
// does): the sender's sends fail with PeerError within PICKLE_TIMEOUT / 2, and closing its communicator takes less
// than that too, instead of waiting PICKLE_TIMEOUT for the dead peer's writes (net_failure_children.cpp).
std::vector<std::string> death_env() {
  auto env = net_env(2);
  env[0] = "PICKLE_TIMEOUT=20";
  return env;
}
TEST_F(Net, SenderSurvivesReceiverDeathAndClosesBeforeTheTimeout) {
  auto statuses = run_ranks("net_sender_survives_receiver_death", 2, {"host"}, death_env(), std::chrono::seconds(120));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(Net, TwoRanksKeepExchangingIntactDataWhenAThirdDiesMidBurst) {
  auto statuses = run_ranks("net_two_survive_third_death", 3, {"host"}, death_env(), std::chrono::seconds(120));
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
  EXPECT_EQ(statuses[2].signal, SIGKILL) << "rank 2 " << statuses[2].describe();
}

// A put whose RMA write fails after the put was announced (here: it times out in the sender's transport, PICKLE_TIMEOUT
// of 4 s, while the receiver, whose PICKLE_TIMEOUT is 40 s, is SIGSTOPped): the sender's stream reports the put, the
// receiver's wait for the signal after it fails with PeerError naming the put within seconds of resuming (before: it
// held on for 40 s and was then released without an error), and the pair is failed on both sides.
TEST_F(Net, APutWhoseWriteFailsAfterItWasAnnouncedFailsTheWaitForItsSignal) {
  for (bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "staged" : "direct");
    expect_all_ok(run_ranks("net_put_write_fails_after_announcement", 2, {"host", "4", "40"},
                            staged ? staged_env(1) : net_env(1), std::chrono::seconds(150)));
  }
}

// Runs net_send_write_fails (net_failure_children.cpp) with its write number `refused` refused by the test hook and
// the outcome it checks ("alone": the receive fails and the pair goes on; "pair": the pair fails), direct and staged.
void expect_refused_write_handled_direct_and_staged(const std::string& refused, const std::string& outcome) {
  for (bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "staged" : "direct");
    auto env = staged ? staged_env(2) : net_env(2);
    env[0] = "PICKLE_TIMEOUT=20";
    expect_all_ok(run_ranks("net_send_write_fails", 2, {"host", refused, outcome}, env, std::chrono::seconds(90)));
  }
}

// A send whose RMA write the sender's transport refuses (the test hook PICKLE_TEST_FAIL_NET_WRITE, as a source
// registration refused on verbs or efa): its Request fails naming the send and the cause, the streams waiting for it
// and for its receive go on, and the receiver's receive fails with PeerError within seconds (before: the sender's
// Request waited until PICKLE_TIMEOUT, the streams for ever, and the receiver was never told). Nothing of it was
// written, so the pair goes on: the next send of the same tag arrives intact.
TEST_F(Net, ASendWhoseWriteIsRefusedFailsWithItsReceiveAndThePairGoesOn) {
  expect_refused_write_handled_direct_and_staged("1", "alone");
}
// A send whose second piece's write is refused after its first piece left (a message over 4 MiB goes in pieces,
// comm/net_pieces.hpp, staged or not): that piece may still land, so the pair fails on both sides, promptly, rather
// than the receive failing alone. Staged, the receiver may have queued the first piece's copy into place: its
// failure waits for that copy, and the buffer the application rewrites after the failure stays as written.
TEST_F(Net, ASendRefusedAfterItsFirstPieceLeftFailsThePairOnBothSides) {
  expect_refused_write_handled_direct_and_staged("2", "pair");
}

// Two "hosts": ranks in separate network namespaces joined by a veth link that drops and delays packets. Nothing is
// forced: the communicator must see that the ranks share no host, pick net for the pair, join them with TCP control
// channels (no Unix socket reaches across namespaces), and move exact data, in every rank program below.
TEST_F(Net, RanksOnTwoHostsPickNetAndTcpControlChannelsByThemselves) {
  std::string why_not;
  auto pair = NetnsPair::create(&why_not);
  if (!pair) GTEST_SKIP() << why_not;
  std::cout << "link impairment: " << pair->impairment() << std::endl;
  const std::vector<std::vector<std::string>> programs = {
      {"comm_transport_and_allreduce", "host", "net"},
      {"comm_sizes", "host", std::to_string(4u << 20)},
      {"comm_errors", "host"},
      {"comm_put_signal", "host"},
      {"comm_peer_death", "host"},
  };
  // Rank 0 is SIGKILLed mid-transfer in comm_peer_death: rank 1 must fail its pending operations promptly.
  const std::vector<std::string> peer_death = {"comm_peer_death", "host"};
  for (const auto& program : programs) {
    SCOPED_TRACE(program[0]);
    const int port = free_tcp_port();
    std::vector<pid_t> pids;
    for (int rank = 0; rank < 2; ++rank) {
      // One process per host: LOCAL_WORLD_SIZE=1, and the store at rank 0's end of the link.
      std::vector<std::string> env = {"RANK=" + std::to_string(rank), "WORLD_SIZE=2", "LOCAL_RANK=0",
                                      "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=" + pair->address(0),
                                      "MASTER_PORT=" + std::to_string(port), "PICKLE_TIMEOUT=60",
                                      "PICKLE_NET_PROVIDER=tcp", "PICKLE_NET_IFACE=" + pair->iface(rank),
                                      "PICKLE_NET_CHUNK=262144", "PICKLE_NET_LANES=2"};
      std::vector<std::string> argv = {self_exe(), "--pickle-child"};
      argv.insert(argv.end(), program.begin(), program.end());
      pids.push_back(spawn_program(pair->exec_in(rank, argv), env));
    }
    const bool killed_rank0 = program == peer_death;
    for (int rank = 0; rank < 2; ++rank) {
      auto status = wait_pid_or_kill(pids[rank], std::chrono::seconds(120));
      if (killed_rank0 && rank == 0) {
        EXPECT_EQ(status.signal, SIGKILL) << "rank 0 " << status.describe();
      } else {
        EXPECT_TRUE(status.ok()) << "rank " << rank << " " << status.describe();
      }
    }
  }
  std::cout << "packets dropped by the impairment: " << pair->drops() << std::endl;
}

}  // namespace
}  // namespace pickle::test
