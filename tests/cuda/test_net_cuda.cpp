// The net transport with GPU memory on 2 GPUs in 2 processes (forced with PICKLE_TRANSPORT=net over tcp on
// loopback): every transfer is staged through pinned host buffers (device-to-host copy, RMA write, host-to-device
// copy), the rank programs of tests/comm with CUDA memory. Issue 8's "bounce-buffer path, data checked".
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "two_gpus.hpp"

namespace pickle::test {
namespace {

std::vector<std::string> net_env() {
  return {"PICKLE_TIMEOUT=60", "PICKLE_TRANSPORT=net", "PICKLE_NET_PROVIDER=tcp", "PICKLE_NET_IFACE=lo",
          "PICKLE_NET_LANES=2", "PICKLE_NET_CHUNK=262144"};
}

class NetCuda : public TwoGpuTest {
 protected:
  void SetUp() override {
    TwoGpuTest::SetUp();
    if (IsSkipped()) return;
    PICKLE_SKIP_WITHOUT_NET_TRANSPORT();
  }
};

TEST_F(NetCuda, SendsFromOneByteTo256MiBBothWaysArriveIntact) {
  expect_all_ok(run_ranks("comm_sizes", 2, {"cuda", std::to_string(256u << 20)}, net_env(), std::chrono::seconds(300)));
}
// A thread blocked in a synchronous copy behind a transfer (tensor.cpu() after a receive) must not hold it up: the
// staged receive's and put's copies into GPU memory must not wait for a CUDA call of pickle's own threads.
TEST_F(NetCuda, ASynchronousCopyBehindATransferDoesNotHoldItUp) {
  for (const char* mode : {"recv", "send", "put"}) {
    SCOPED_TRACE(mode);
    expect_all_ok(run_ranks("comm_blocking_copy_behind_transfer", 2, {"cuda", mode}, net_env(),
                            std::chrono::seconds(45)));
  }
}
TEST_F(NetCuda, MessagesAroundChunkBoundariesArriveIntact) {
  expect_all_ok(run_ranks("shm_boundaries", 2, {"cuda", "net"}, net_env()));
}
TEST_F(NetCuda, HundredsOfTaggedMessagesInShuffledOrderBothWays) {
  expect_all_ok(run_ranks("comm_many_tags", 2, {"cuda"}, net_env()));
}
TEST_F(NetCuda, PutSignalWaitThroughAWindowAndErrors) {
  expect_all_ok(run_ranks("comm_put_signal", 2, {"cuda"}, net_env()));
  expect_all_ok(run_ranks("comm_errors", 2, {"cuda"}, net_env()));
}
// Each receive's staging buffer goes back to the pool (from a host callback on the staging stream) once copied into
// place: 100 receives in a row register at most 2; and a receive refused its staging buffer fails alone.
TEST_F(NetCuda, ReceivesOneAtATimeReuseTheirStagingBuffers) {
  expect_all_ok(run_ranks("comm_staged_recv_reuse", 2, {"cuda"}, net_env()));
}
// Receives posted while a stream of the receiver waits for the sender must not wait for that stream (freeing pinned
// staging memory would: cudaHostUnregister waits for every stream of the device).
TEST_F(NetCuda, ReceivesPostedWhileAStreamWaitsForTheSenderDoNotWaitForIt) {
  expect_all_ok(run_ranks("comm_staged_recv_while_a_stream_waits", 2, {"cuda"}, net_env(), std::chrono::seconds(150)));
}
// Ten 256 MiB sends queued behind a stream that waits for the peer must all be enqueued before it opens: with fixed
// 4 MiB pieces (64 per message here, 3 stream operations each) the CUDA stream's queue filled and the enqueue blocked
// for good, as `pickle bench p2p` over net did at 256 MiB (docs/results/2026-11-28-h200x4.md).
TEST_F(NetCuda, StagedSendsQueuedBehindAWaitingStreamAllGoOut) {
  expect_all_ok(run_ranks("comm_staged_sends_behind_a_waiting_stream", 2, {"cuda", std::to_string(256u << 20), "10"},
                          net_env(), std::chrono::seconds(180)));
}
// A send that joins a stream whose queue is full waits in its queuing until the stream runs; the stream waits for a
// signal of the peer, which comes through the progress thread. Queued while holding the communicator's lock, the
// send stopped that thread, and the rank hung for good: its copy (the receive posted first) or its event (later).
TEST_F(NetCuda, ASendOnAFullStreamWaitsWithoutStoppingTheProgressThread) {
  for (const char* when : {"posted", "late"}) {
    SCOPED_TRACE(when);
    TempDir folder("full-stream");
    expect_all_ok(
        run_ranks("comm_send_on_a_full_stream", 2, {"cuda", folder.str(), when}, net_env(), std::chrono::seconds(90)));
  }
}
// 500 sends matched on the progress thread, each queued behind an event of a stream that waits for the peer: their
// copy stream's queue fills, and the thread that queues them waits; the progress thread must not be that thread.
TEST_F(NetCuda, SendsMatchedLateBehindAGateDoNotStopTheProgressThread) {
  expect_all_ok(
      run_ranks("comm_sends_matched_late_behind_a_gate", 2, {"cuda", "500"}, net_env(), std::chrono::seconds(90)));
}
// Three ranks: rank 0's late matches for rank 1 wait on a full copy stream behind a gate that rank 2 opens once
// its own late-matched message arrived; they must not hold that message up.
TEST_F(NetCuda, LateMatchesOfAHeldPairDoNotHoldUpAnother) {
  expect_all_ok(run_ranks("comm_late_matches_of_a_held_pair_do_not_hold_another", 3, {"cuda", "500"}, net_env(),
                          std::chrono::seconds(90)));
}
// Teardown while late-matched sends wait to be queued behind a gate that the peer, still busy, never opens.
TEST_F(NetCuda, TeardownWithLateMatchesBehindAGateThatNeverOpensEnds) {
  auto env = net_env();
  std::replace(env.begin(), env.end(), std::string("PICKLE_TIMEOUT=60"), std::string("PICKLE_TIMEOUT=5"));
  TempDir folder("closed-gate");
  expect_all_ok(run_ranks("comm_teardown_with_late_matches_behind_a_closed_gate", 2, {"cuda", folder.str(), "500"},
                          env, std::chrono::seconds(90)));
}
TEST_F(NetCuda, AReceiveWithoutAStagingBufferFailsAloneAndThePairGoesOn) {
  expect_all_ok(run_ranks("comm_net_recv_refused", 2, {"cuda"}, net_env()));
}
TEST_F(NetCuda, PeerKilledMidTransferFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"cuda"}, net_env(), std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(NetCuda, APeerKilledMidTransferIsReportedOnAStreamThatWaitsForItsReceives) {
  auto statuses = run_ranks("comm_peer_death_seen_on_a_stream", 2, {"cuda"}, net_env(), std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

}  // namespace
}  // namespace pickle::test
