// The collectives on 2 GPUs in 2 processes: the rank programs of tests/comm/coll_children.cpp with CUDA memory.
// Data moves by copy engines; reductions run the CUDA kernel on at most PICKLE_REDUCE_CTAS CTAs.
#include <gtest/gtest.h>

#include <signal.h>

#include "../mp/netns_pair.hpp"
#include "../mp/two_hosts.hpp"
#include "two_gpus.hpp"

namespace pickle::test {
namespace {

class CollCuda : public TwoGpuTest {};

TEST_F(CollCuda, EveryCollectiveTypeAndOperatorMatchesTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 2, {"cuda"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(300)));
}
// Both ranks in one process (threads, one CUDA context): bounded by the child's time limit, since the deadlock it
// guards against (a lazily loaded reduction kernel) waits on no timeout of pickle's.
// The net transport between the two ranks (tcp on loopback; GPU memory staged through pinned buffers): the matrix,
// as the ranks of different hosts run it.
TEST_F(CollCuda, EveryCollectiveOverTheNetTransportMatchesTheReference) {
  PICKLE_SKIP_WITHOUT_NET_TRANSPORT();
  expect_all_ok(run_ranks("coll_matrix", 2, {"cuda"},
                          {"PICKLE_TIMEOUT=30", "PICKLE_TRANSPORT=net", "PICKLE_NET_PROVIDER=tcp",
                           "PICKLE_NET_IFACE=lo"},
                          std::chrono::seconds(300)));
}
TEST_F(CollCuda, TwoRanksAsThreadsOfOneProcessRunAllgathersThenAllreduces) {
  expect_all_ok(run_ranks("coll_two_ranks_as_threads", 1, {"cuda"}, {"PICKLE_TIMEOUT=30"}, std::chrono::seconds(90)));
}
// Communicator::split on CUDA memory: 5 ranks sharing the GPUs round robin, groups with their own transports.
TEST_F(CollCuda, SplitMakesGroupsThatWorkOnTheirOwnAndOutliveTheirParent) {
  expect_all_ok(run_ranks("comm_split", 5, {"cuda"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(180)));
}
TEST_F(CollCuda, OneRankMatchesTheReference) {
  // A world of one copies instead of reducing: every type and operator must still give the reference.
  expect_all_ok(run_ranks("coll_matrix", 1, {"cuda"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(300)));
}
TEST_F(CollCuda, ThreeRanksSharingTheGpusMatchTheReference) {
  // An odd rank count on the CUDA path (uneven blocks, a ring of 3); ranks share GPUs round robin.
  expect_all_ok(run_ranks("coll_matrix", 3, {"cuda"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(400)));
}
TEST_F(CollCuda, SendsTakingTurnsOverThreeCopyStreamsStillMatchTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 2, {"cuda"}, {"PICKLE_TIMEOUT=60", "PICKLE_IPC_STREAMS=3"},
                          std::chrono::seconds(300)));
}
// CUDA chunks are 16 MiB, so the matrix's sizes (about 1 MiB) take one chunk each: 64 KiB chunks run the GPU
// pipeline (scratch stages reused behind queued reductions) through several chunks per call.
TEST_F(CollCuda, SmallChunksStillMatchTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 2, {"cuda"}, {"PICKLE_TIMEOUT=60", "PICKLE_COLL_CHUNK=65536"},
                          std::chrono::seconds(300)));
}
// Both forms of allreduce that the default takes by size, each forced for every call (fused: the matrix's small
// counts; one-shot: its large ones), three ranks sharing the two GPUs, 64 KiB chunks.
TEST_F(CollCuda, TheFusedAndOneShotAllreducesMatchTheReference) {
  for (const char* schedule : {"PICKLE_ALLREDUCE_SCHEDULE=fused", "PICKLE_ALLREDUCE_SCHEDULE=oneshot"}) {
    expect_all_ok(run_ranks("coll_matrix", 3, {"cuda"}, {"PICKLE_TIMEOUT=60", schedule, "PICKLE_COLL_CHUNK=65536"},
                            std::chrono::seconds(400)));
  }
}
// Allreduces through the mailboxes (PICKLE_ALLREDUCE_SCHEDULE=mailbox): the matrix on two GPUs (its counts of 1 and
// 1003 elements in the LL form, the default; then in the loads form, PICKLE_ALLREDUCE_LL_MAX=0, pulled and pushed)
// and on three ranks sharing them (copy engines: not gated); 150 calls back to back on two streams with one rank's
// host late, in the loads form alone (pulled; pushed; the calls of 16 KB and more pushed), in LL alone up to its
// largest (the calls of 20000 floats on 5 CTAs), in LL on several CTAs then loads (up to 64 KiB: the calls of 10000
// floats on 3 CTAs, those of 20000 pushed on several, sharing the CTA counts), in the copy form alone, in loads and
// copy (16 KiB: the calls of 10000 and 20000 floats by copy engines), and in all three forms (LL up to 4 KiB, loads
// up to 16 KiB, pushed), so that a cell's next call may take another form; and in place at unaligned addresses, the
// small calls in the LL form (up to 200 KB, on several CTAs) or the loads form (pulled or pushed), the large ones on
// several CTAs of the loads form. With one GPU both ranks share it, the mailboxes are not gated, and every run takes
// the copy form (the LL kernel's own test, test_ll_allreduce_cuda, runs on one GPU).
TEST_F(CollCuda, TheMailboxAllreduceMatchesTheReference) {
  if (device::cuda_device_count() < 2) std::printf("[info] one GPU: the loads and LL forms are not taken\n");
  const std::vector<std::string> mailbox{"PICKLE_TIMEOUT=60", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), mailbox.begin(), mailbox.end());
    return more;
  };
  for (int ranks : {2, 3}) {
    expect_all_ok(run_ranks("coll_matrix", ranks, {"cuda"}, mailbox, std::chrono::seconds(400)));
  }
  const std::vector<std::vector<std::string>> loads{{"PICKLE_ALLREDUCE_LL_MAX=0"},
                                                    {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_PUSH_MIN=0"}};
  for (const auto& form : loads) {
    SCOPED_TRACE(form.back());
    expect_all_ok(run_ranks("coll_matrix", 2, {"cuda"}, with(form), std::chrono::seconds(400)));
  }
  const std::vector<std::vector<std::string>> unaligned{
      {"PICKLE_ALLREDUCE_LL_MAX=262144"},
      {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_PUSH_MIN=4194305"},
      {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_PUSH_MIN=0"}};
  for (const auto& form : unaligned) {
    SCOPED_TRACE(form.back());
    expect_all_ok(run_ranks("coll_mailbox_in_place_unaligned", 2, {"cuda"}, with(form), std::chrono::seconds(120)));
  }
  const std::vector<std::vector<std::string>> forms{
      {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_LOADS_MAX=4194304", "PICKLE_ALLREDUCE_PUSH_MIN=4194305"},
      {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_LOADS_MAX=4194304", "PICKLE_ALLREDUCE_PUSH_MIN=0"},
      {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_LOADS_MAX=4194304", "PICKLE_ALLREDUCE_PUSH_MIN=16384"},
      {"PICKLE_ALLREDUCE_LL_MAX=262144", "PICKLE_ALLREDUCE_LOADS_MAX=4194304"},
      {"PICKLE_ALLREDUCE_LL_MAX=65536", "PICKLE_ALLREDUCE_LOADS_MAX=4194304"},
      {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_LOADS_MAX=0"},
      {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_LOADS_MAX=16384"},
      {"PICKLE_ALLREDUCE_LL_MAX=4096", "PICKLE_ALLREDUCE_LOADS_MAX=16384", "PICKLE_ALLREDUCE_PUSH_MIN=16384"}};
  for (const auto& form : forms) {
    std::string named;
    for (const std::string& setting : form) named += setting + " ";
    SCOPED_TRACE(named);
    expect_all_ok(run_ranks("coll_mailbox_back_to_back", 2, {"cuda"}, with(form), std::chrono::seconds(120)));
  }
}
// Through the mailboxes, what the host waits of the two-sided path used to catch: counts that differ between the
// ranks, a peer that skips a call (its partners' GPU streams wait on a count that never comes) and one that dies.
TEST_F(CollCuda, MailboxAllreducesFailCleanlyOnEveryRank) {
  // 10 s: the watch's margin before the stream's own deadline is then a second (a tenth of the timeout).
  const std::vector<std::string> env{"PICKLE_TIMEOUT=10", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"};
  expect_all_ok(run_ranks("coll_mailbox_count_mismatch", 2, {"cuda"}, env, std::chrono::seconds(60)));
  expect_all_ok(run_ranks("coll_absent_peer", 3, {"cuda", "small"}, env, std::chrono::seconds(90)));
  // Two ranks, one per GPU: the LL form (the default for small calls), whose kernel polls for its lines, and the
  // loads form, pulled and pushed, whose kernel waits for the absent rank's announcement itself.
  std::vector<std::string> pulled = env, pushed = env;
  pulled.push_back("PICKLE_ALLREDUCE_LL_MAX=0");
  pushed.insert(pushed.end(), {"PICKLE_ALLREDUCE_LL_MAX=0", "PICKLE_ALLREDUCE_PUSH_MIN=0"});
  for (const std::vector<std::string>& with : {env, pulled, pushed}) {
    SCOPED_TRACE(with.back());
    expect_all_ok(run_ranks("coll_absent_peer", 2, {"cuda", "small"}, with, std::chrono::seconds(90)));
  }
  // A peer that dies, in each of them.
  for (const std::vector<std::string>& with : {env, pulled, pushed}) {
    SCOPED_TRACE(with.back());
    auto statuses = run_ranks("coll_peer_death", 2, {"cuda", "small"}, with, std::chrono::seconds(60));
    EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
    EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
  }
  // Both in the LL form on several CTAs (80 KB calls: 5 CTAs, each watcher must see the release).
  expect_all_ok(run_ranks("coll_absent_peer", 2, {"cuda", "medium"}, env, std::chrono::seconds(90)));
  auto statuses = run_ranks("coll_peer_death", 2, {"cuda", "medium"}, env, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0, medium " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1, medium " << statuses[1].describe();
}
TEST_F(CollCuda, OneCtaReductionsAreStillCorrect) {
  expect_all_ok(run_ranks("coll_matrix", 2, {"cuda"}, {"PICKLE_TIMEOUT=60", "PICKLE_REDUCE_CTAS=1"},
                          std::chrono::seconds(300)));
}
TEST_F(CollCuda, AllgathersOfLargeBlocksCopyTheOwnBlockBesideTheSends) {
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 2, {"cuda", "64"}, {"PICKLE_TIMEOUT=60"}));
}
// Both allgather schedules on GPUs: three ranks (so that a rank has two peers, taken in turn or at once) sharing the
// two GPUs, with 32 MiB blocks whose own copy goes beside the sends.
TEST_F(CollCuda, BothAllgatherSchedulesMoveEveryBlock) {
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 3, {"cuda", "32"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_SCHEDULE=staggered"}));
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 3, {"cuda", "32"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_SCHEDULE=parallel"}));
}
// PICKLE_ALLGATHER_OWN_COPY=relay on GPUs: ranks mixing in place and out of place (the bytes written into peers
// counted), and large blocks on two and three ranks.
TEST_F(CollCuda, TheRelayedOwnBlockArrivesFromTheNextRank) {
  const char* relay = "PICKLE_ALLGATHER_OWN_COPY=relay";
  expect_all_ok(run_ranks("coll_allgather_own_copy", 2, {"cuda"}, {"PICKLE_TIMEOUT=60", relay}));
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 2, {"cuda", "64"}, {"PICKLE_TIMEOUT=60", relay}));
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 3, {"cuda", "32"}, {"PICKLE_TIMEOUT=60", relay}));
}
// The pipeline schedules other than the default (ordered) on GPUs: parallel and staggered; three ranks sharing the
// two GPUs (two peers each: on side streams of their own, or one shared), 64 KiB chunks so that the matrix's calls
// run through several chunks.
TEST_F(CollCuda, TheParallelAndStaggeredPipelineSchedulesMatchTheReference) {
  for (const char* schedule : {"PICKLE_PIPELINE_SCHEDULE=parallel", "PICKLE_PIPELINE_SCHEDULE=staggered"}) {
    expect_all_ok(run_ranks("coll_matrix", 3, {"cuda"}, {"PICKLE_TIMEOUT=60", schedule, "PICKLE_COLL_CHUNK=65536"},
                            std::chrono::seconds(400)));
  }
}
// The ordered pipeline schedule on GPUs: the tokens are stream write-values into the peers' mapped words and stream
// waits on this rank's, after each copy on the shared side stream; three ranks sharing the two GPUs, 64 KiB chunks.
// Then the same with 384 MiB allreduces, which go in phases, exact.
TEST_F(CollCuda, TheOrderedPipelineScheduleMatchesTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 3, {"cuda"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_PIPELINE_SCHEDULE=ordered", "PICKLE_COLL_CHUNK=65536"},
                          std::chrono::seconds(400)));
  expect_all_ok(run_ranks("coll_large", 3, {"cuda", "384"}, {"PICKLE_TIMEOUT=60", "PICKLE_PIPELINE_SCHEDULE=ordered"},
                          std::chrono::seconds(400)));
}
// Three ranks sharing the two GPUs with 384 MiB allreduces: blocks of 128 MiB, which the default schedule (auto) sends
// in two phases (reduce_scatter, then allgather in place), f32 and bf16, checked exactly.
TEST_F(CollCuda, LargeAllreducesOnThreeRanksGoInPhasesAndAreExact) {
  expect_all_ok(run_ranks("coll_large", 3, {"cuda", "384"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(400)));
}
// Two ranks' fused allreduces of 16-96 MiB: blocks of 8-48 MiB, which go in the finer chunks of
// two_rank_allreduce_chunk_elements (halves; bf16 in 8 MiB), f32 out of place and bf16 in place, exact.
TEST_F(CollCuda, TwoRankAllreducesInFinerChunksAreExact) {
  for (const char* mib : {"16", "24", "32", "96"}) {
    SCOPED_TRACE(mib);
    expect_all_ok(run_ranks("coll_large", 2, {"cuda", mib}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(120)));
  }
}
// 4 MiB allreduces (f32 out of place, bf16 in place; three rounds, so that the cells are reused), the mailboxes'
// largest on two ranks: the loads form on every CTA it may take (8 by default, 32 with PICKLE_REDUCE_CTAS=32,
// kMaxGatedCtas), pushed (the default) and pulled. With one GPU the mailboxes are not gated: the copy form.
TEST_F(CollCuda, TheLargestMailboxAllreducesOnUpTo32CtasAreExact) {
  if (device::cuda_device_count() < 2) std::printf("[info] one GPU: the loads form is not taken\n");
  const std::vector<std::vector<std::string>> settings{
      {"PICKLE_TIMEOUT=60"},
      {"PICKLE_TIMEOUT=60", "PICKLE_REDUCE_CTAS=32"},
      {"PICKLE_TIMEOUT=60", "PICKLE_REDUCE_CTAS=32", "PICKLE_ALLREDUCE_PUSH_MIN=4194305"},
      {"PICKLE_TIMEOUT=60", "PICKLE_REDUCE_CTAS=13", "PICKLE_ALLREDUCE_PUSH_MIN=0"}};
  for (const auto& env : settings) {
    SCOPED_TRACE(env.back());
    expect_all_ok(run_ranks("coll_large", 2, {"cuda", "4", "3"}, env, std::chrono::seconds(120)));
  }
}
TEST_F(CollCuda, OneGiBAllreducesF32AndBf16AreExact) {
  expect_all_ok(run_ranks("coll_large", 2, {"cuda", "1024"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(400)));
}
TEST_F(CollCuda, BadArgumentsAreClearErrorsAndLeaveTheCollectivesUsable) {
  expect_all_ok(run_ranks("coll_errors", 2, {"cuda"}, {"PICKLE_TIMEOUT=30"}));
}
TEST_F(CollCuda, PeerKilledDuringAllreducesFailsTheOtherRankPromptly) {
  auto statuses = run_ranks("coll_peer_death", 2, {"cuda"}, {"PICKLE_TIMEOUT=5"}, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(CollCuda, PeerKilledAfterItsCallReturnedFailsTheStreamSynchronize) {
  auto statuses = run_ranks("coll_death_after_call", 2, {"cuda"}, {"PICKLE_TIMEOUT=10"}, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(CollCuda, PeerKilledAfterItsCallReturnedFailsTheStreamSynchronizeAfterTheCommunicatorWent) {
  auto statuses =
      run_ranks("coll_death_after_call", 2, {"cuda", "destroy_first"}, {"PICKLE_TIMEOUT=10"}, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

// Two "hosts" of two ranks each (two network namespaces made by the test, root needed; GPU memory staged through
// pinned buffers between them): allreduce, broadcast, allgather and reduce_scatter in two levels, their network
// bytes, and the whole matrix with hosts of consecutive and of mirrored ranks (tests/comm/test_coll_transports.cpp
// runs the same on host memory).
TEST_F(CollCuda, CollectivesAcrossTwoHostsOfTwoRanksGoInTwoLevels) {
  PICKLE_SKIP_WITHOUT_NET_TRANSPORT();
  std::string why_not;
  auto pair = NetnsPair::create(&why_not, /*impaired=*/false);
  if (!pair) GTEST_SKIP() << why_not;
  const std::vector<std::string> env = {"PICKLE_TIMEOUT=30"};
  const auto limit = std::chrono::seconds(300);
  {
    SCOPED_TRACE("coll_two_levels");
    expect_all_ok(run_on_two_hosts(*pair, {"coll_two_levels", "cuda", "two"}, TwoHostLayout::Blocked, env, limit));
  }
  {
    SCOPED_TRACE("coll_matrix, hosts 0 1 | 2 3");
    expect_all_ok(run_on_two_hosts(*pair, {"coll_matrix", "cuda", "2"}, TwoHostLayout::Blocked, env, limit));
  }
  {
    SCOPED_TRACE("coll_matrix, hosts 0 3 | 1 2");
    expect_all_ok(
        run_on_two_hosts(*pair, {"coll_matrix", "cuda", "2", "mirrored"}, TwoHostLayout::Mirrored, env, limit));
  }
}

}  // namespace
}  // namespace pickle::test
