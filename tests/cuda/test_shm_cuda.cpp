// The shm transport on 2 GPUs in 2 processes (forced with PICKLE_TRANSPORT=shm, since the GPUs of the test machine
// have peer access): device-to-host into the staging ring, host-to-device out of it, the rank programs of
// tests/comm with CUDA memory.
#include <gtest/gtest.h>

#include "two_gpus.hpp"

namespace pickle::test {
namespace {

const std::vector<std::string> kShm = {"PICKLE_TIMEOUT=60", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=1048576",
                                       "PICKLE_SHM_SLOTS=3"};

class ShmCuda : public TwoGpuTest {};

TEST_F(ShmCuda, MessagesAroundChunkBoundariesArriveIntact) {
  expect_all_ok(run_ranks("shm_boundaries", 2, {"cuda"}, kShm));
}
TEST_F(ShmCuda, SendsFromOneByteTo1GiBBothWaysArriveIntact) {
  expect_all_ok(run_ranks("comm_sizes", 2, {"cuda", std::to_string(1u << 30)},
                          {"PICKLE_TIMEOUT=60", "PICKLE_TRANSPORT=shm"}, std::chrono::seconds(240)));
}
TEST_F(ShmCuda, HundredsOfTaggedMessagesInShuffledOrderBothWays) {
  expect_all_ok(run_ranks("comm_many_tags", 2, {"cuda"}, kShm));
}
TEST_F(ShmCuda, PutSignalWaitThroughAWindow) { expect_all_ok(run_ranks("comm_put_signal", 2, {"cuda"}, kShm)); }
TEST_F(ShmCuda, APutAndSignalHeldByTheirStreamDoNotHoldUpALaterSend) {
  expect_all_ok(run_ranks("comm_put_held_by_stream", 2, {"cuda"}, kShm));
}
TEST_F(ShmCuda, MorePutsThanPutWordsReuseThemInTurn) {
  expect_all_ok(run_ranks("comm_put_many", 2, {"cuda"}, kShm));
}
TEST_F(ShmCuda, PeerKilledMidPipelineFailsPendingOperationsPromptly) {
  auto statuses = run_ranks("comm_peer_death", 2, {"cuda"}, kShm, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(ShmCuda, APeerKilledMidTransferIsReportedOnAStreamThatWaitsForItsReceives) {
  auto statuses = run_ranks("comm_peer_death_seen_on_a_stream", 2, {"cuda"}, kShm, std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(ShmCuda, StreamWaitingOnADeadPeersSignalIsReleased) {
  auto statuses = run_ranks("comm_signal_dead_peer", 2, {"cuda"},
                            {"PICKLE_TIMEOUT=20", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=1048576"});
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
}

// Rank 0 destroys its communicator while its sends wait behind a gate that rank 1, still busy, never opens: the
// gate's release must not let rank 1 take the ring's stale slots for its messages.
TEST_F(ShmCuda, TeardownWithSendsBehindAGateThatNeverOpensGivesThePeerNoGarbage) {
  TempDir folder("closed-gate");
  expect_all_ok(run_ranks("comm_teardown_with_late_matches_behind_a_closed_gate", 2, {"cuda", folder.str(), "100"},
                          {"PICKLE_TIMEOUT=5", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=1048576"},
                          std::chrono::seconds(90)));
}

// Rank 0 fails the pair while rank 1 is stopped with a receive under way, reuses the send's buffer and resumes rank 1:
// the receive fails or holds the message (the ring's stale slots are never taken for it).
TEST_F(ShmCuda, APeerResumedAfterItsPairFailedTakesNoStaleBytes) {
  // 256 KiB: 64 chunks, all queued before the failure; 1 MiB: more than a worker queues ahead (128), so the rest
  // never comes. Looked at at once, and once the ring let the stale bytes through.
  for (unsigned bytes : {256u << 10, 1u << 20}) {
    for (const char* look_after_ms : {"0", "500"}) {
      TempDir folder("resumed-after-failure");
      expect_all_ok(run_ranks("comm_a_peer_resumed_after_its_pair_failed_takes_no_stale_bytes", 2,
                              {"cuda", std::to_string(bytes), folder.str(), look_after_ms},
                              {"PICKLE_TIMEOUT=3", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096",
                               "PICKLE_SHM_SLOTS=2"},
                              std::chrono::seconds(90)));
    }
  }
}

// The same, with the receive looked at only through a stream that waits for it (Request::on_stream), as a kernel
// that consumes the message would: the stream's synchronize throws the receive's failure.
TEST_F(ShmCuda, AStreamThatWaitsForAReceiveFromAPeerThatGaveUpThrowsAtSynchronize) {
  for (unsigned bytes : {256u << 10, 1u << 20}) {
    TempDir folder("resumed-after-failure-stream");
    expect_all_ok(run_ranks("comm_a_peer_resumed_after_its_pair_failed_takes_no_stale_bytes", 2,
                            {"cuda", std::to_string(bytes), folder.str(), "0", "stream"},
                            {"PICKLE_TIMEOUT=3", "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=4096", "PICKLE_SHM_SLOTS=2"},
                            std::chrono::seconds(90)));
  }
}

}  // namespace
}  // namespace pickle::test
