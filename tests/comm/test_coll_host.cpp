// The collectives on host memory across real processes: the same rank programs as the GPU tests
// (tests/comm/coll_children.cpp). One launch of the ranks per rank count runs every collective x datatype x operator.
#include <gtest/gtest.h>

#include <signal.h>

#include <string>
#include <utility>

#include "rank_statuses.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

class CollMatrix : public testing::TestWithParam<int> {};
TEST_P(CollMatrix, EveryCollectiveTypeAndOperatorMatchesTheReference) {
  expect_all_ok(run_ranks("coll_matrix", GetParam(), {"host"}, {"PICKLE_TIMEOUT=60"}, std::chrono::seconds(240)));
}
INSTANTIATE_TEST_SUITE_P(Coll, CollMatrix, testing::Values(1, 2, 3, 4, 8),
                         [](const testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

// With several copy streams per peer, every send of a collective leaves the collective's stream for a copy stream,
// ordered after it by an event: the matrix's slow-producer case fails if that order is lost.
TEST(Coll, SendsTakingTurnsOverThreeCopyStreamsStillMatchTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 3, {"host"}, {"PICKLE_TIMEOUT=60", "PICKLE_IPC_STREAMS=3"},
                          std::chrono::seconds(240)));
}

// Chunks of one page (PICKLE_COLL_CHUNK): every pipeline runs through a hundred chunks and more, with blocks and
// counts that do not divide into them.
TEST(Coll, APageSizedChunkStillMatchesTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 3, {"host"}, {"PICKLE_TIMEOUT=60", "PICKLE_COLL_CHUNK=4096"},
                          std::chrono::seconds(240)));
}

TEST(Coll, AChunkSettingThatIsNotAMultipleOfAPageIsAClearError) {
  expect_all_ok(
      run_ranks("coll_bad_setting", 2, {"host", "PICKLE_COLL_CHUNK"}, {"PICKLE_TIMEOUT=30", "PICKLE_COLL_CHUNK=5000"}));
}

// The parallel allgather schedule (every peer's copy at once, each on its own copy queue; the default, staggered,
// runs in every other test): the whole matrix, whose allgathers and allgather-based steps then run it, and blocks
// large enough that the own block is copied beside the sends.
TEST(Coll, TheParallelAllgatherScheduleStillMatchesTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 4, {"host"}, {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_SCHEDULE=parallel"},
                          std::chrono::seconds(240)));
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 3, {"host", "16"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_SCHEDULE=parallel"}));
}

// PICKLE_ALLGATHER_OWN_COPY=relay (rank + 1 sends each rank's block back instead of a local copy): the matrix on 2
// and 4 ranks (4 with both allgather schedules), ranks mixing in place and out of place on 2 and 3, large blocks; and
// the default, local, with the same byte count check (no relay sent).
TEST(Coll, TheRelayedOwnBlockArrivesFromTheNextRank) {
  for (const char* schedule : {"PICKLE_ALLGATHER_SCHEDULE=staggered", "PICKLE_ALLGATHER_SCHEDULE=parallel"}) {
    expect_all_ok(run_ranks("coll_matrix", 4, {"host"},
                            {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_OWN_COPY=relay", schedule},
                            std::chrono::seconds(240)));
  }
  expect_all_ok(run_ranks("coll_matrix", 2, {"host"}, {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_OWN_COPY=relay"},
                          std::chrono::seconds(240)));
  for (int ranks : {2, 3}) {
    expect_all_ok(
        run_ranks("coll_allgather_own_copy", ranks, {"host"},
                  {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_OWN_COPY=relay"}));
  }
  expect_all_ok(run_ranks("coll_allgather_own_copy", 3, {"host"}, {"PICKLE_TIMEOUT=60"}));
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 3, {"host", "16"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_ALLGATHER_OWN_COPY=relay"}));
}

TEST(Coll, AnUnknownOwnCopySettingIsAClearErrorAndOneRankAloneCannotRelay) {
  expect_all_ok(run_ranks("coll_bad_setting", 2, {"host", "PICKLE_ALLGATHER_OWN_COPY"},
                          {"PICKLE_TIMEOUT=30", "PICKLE_ALLGATHER_OWN_COPY=mirror"}));
  for (const char* value : {"local", "relay"}) {
    expect_all_ok(run_ranks("coll_setting_on_one_rank", 2, {"host", "PICKLE_ALLGATHER_OWN_COPY", value},
                            {"PICKLE_TIMEOUT=30"}));
  }
}

// The pipeline schedules other than the default (ordered, which runs in every other test): parallel (a side stream
// per peer and lane, every peer at once) and staggered (one side stream per lane, no tokens): the matrix's
// reduce_scatters, allreduces and in-place alltoalls on 4 and 3 ranks, with page-sized chunks so that every call runs
// through many chunks on the side streams.
TEST(Coll, TheParallelAndStaggeredPipelineSchedulesStillMatchTheReference) {
  for (const char* schedule : {"PICKLE_PIPELINE_SCHEDULE=parallel", "PICKLE_PIPELINE_SCHEDULE=staggered"}) {
    for (int ranks : {4, 3}) {
      expect_all_ok(run_ranks("coll_matrix", ranks, {"host"},
                              {"PICKLE_TIMEOUT=60", schedule, "PICKLE_COLL_CHUNK=4096"}, std::chrono::seconds(240)));
    }
  }
}

// Allreduce in two phases (a whole reduce_scatter into the rank's block, then an allgather in place), which the
// default (auto) takes only from three ranks on one host with blocks of 32 MiB and more: the matrix's allreduces on
// 4, 3 and 2 ranks, whose small counts leave some blocks short or empty (those stay fused), and page-sized chunks
// for many chunks per reduce_scatter.
TEST(Coll, ThePhasedAllreduceStillMatchesTheReference) {
  for (int ranks : {4, 3, 2}) {
    expect_all_ok(run_ranks("coll_matrix", ranks, {"host"},
                            {"PICKLE_TIMEOUT=60", "PICKLE_ALLREDUCE_SCHEDULE=phased", "PICKLE_COLL_CHUNK=4096"},
                            std::chrono::seconds(240)));
  }
}

// The two forms of allreduce that the default (auto) takes by size, each forced for every call: fused (the matrix's
// small counts, some leaving blocks short or empty, would otherwise go one-shot) and one-shot (the matrix's large
// counts on four ranks would otherwise go fused); page-sized chunks, so that one-shot runs through many chunks too.
TEST(Coll, TheFusedAndOneShotAllreducesStillMatchTheReference) {
  for (const char* schedule : {"PICKLE_ALLREDUCE_SCHEDULE=fused", "PICKLE_ALLREDUCE_SCHEDULE=oneshot"}) {
    for (int ranks : {4, 3, 2}) {
      expect_all_ok(run_ranks("coll_matrix", ranks, {"host"}, {"PICKLE_TIMEOUT=60", schedule, "PICKLE_COLL_CHUNK=4096"},
                              std::chrono::seconds(240)));
    }
  }
}

// Allreduces through the mailboxes (PICKLE_ALLREDUCE_SCHEDULE=mailbox): the matrix on 2, 3, 4 and 8 ranks (its
// small counts go through them, the large ones as auto), then 150 calls back to back without a synchronize, on two
// streams, one rank's host late.
TEST(Coll, TheMailboxAllreduceMatchesTheReference) {
  for (int ranks : {4, 3, 2, 8}) {
    expect_all_ok(run_ranks("coll_matrix", ranks, {"host"}, {"PICKLE_TIMEOUT=60", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"},
                            std::chrono::seconds(240)));
  }
  for (int ranks : {3, 2}) {
    expect_all_ok(run_ranks("coll_mailbox_back_to_back", ranks, {"host"},
                            {"PICKLE_TIMEOUT=60", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"}, std::chrono::seconds(120)));
  }
  expect_all_ok(run_ranks("coll_mailbox_in_place_unaligned", 2, {"host"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"}, std::chrono::seconds(120)));
}

// Counts that differ between the ranks, both small enough for the mailboxes: the labels show it in that very call.
TEST(Coll, MailboxCountsThatDifferBetweenRanksFailEveryRankInThatCall) {
  expect_all_ok(run_ranks("coll_mailbox_count_mismatch", 2, {"host"},
                          {"PICKLE_TIMEOUT=20", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"}, std::chrono::seconds(90)));
}

// A peer that skips an allreduce through the mailboxes, or dies during a series of them: the survivors' streams wait
// on counts that never come, with no host wait to time out; the progress thread's watch (or the dead channel) fails
// the pair, and every survivor's call or synchronize reports it naming the peer, within PICKLE_TIMEOUT.
// PICKLE_TIMEOUT=10 for the absent peer: the watch fails the pair a second before the stream's own synchronize
// deadline (a tenth of the timeout, at most a second), a margin that a loaded two-core machine keeps.
TEST(Coll, APeerThatSkipsOrDiesDuringMailboxAllreducesFailsTheOthersWithinTheTimeout) {
  expect_all_ok(run_ranks("coll_absent_peer", 3, {"host", "small"},
                          {"PICKLE_TIMEOUT=10", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"}, std::chrono::seconds(90)));
  auto statuses = run_ranks("coll_peer_death", 3, {"host", "small"},
                            {"PICKLE_TIMEOUT=5", "PICKLE_ALLREDUCE_SCHEDULE=mailbox"}, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  for (std::size_t rank = 1; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}

// The ordered pipeline schedule (staggered, each input copy into a peer waiting for the token of the rank that copied
// into it just before): the matrix's reduce_scatters, allreduces and in-place alltoalls on 4 and 3 ranks with
// page-sized chunks, so that every call raises and awaits many tokens (but the one-shot allreduces, which raise none;
// the fused ones run under this default schedule in TheFusedAndOneShotAllreducesStillMatchTheReference); a count
// that one side raises and the other does not await (or the reverse) leaves a stream waiting and the call times out. With 3 copy streams per peer the
// copies leave the side stream, and each token first waits for its copy's completion word.
TEST(Coll, TheOrderedPipelineScheduleMatchesTheReference) {
  for (int ranks : {4, 3}) {
    expect_all_ok(run_ranks("coll_matrix", ranks, {"host"},
                            {"PICKLE_TIMEOUT=60", "PICKLE_PIPELINE_SCHEDULE=ordered", "PICKLE_COLL_CHUNK=4096"},
                            std::chrono::seconds(240)));
  }
  expect_all_ok(run_ranks("coll_matrix", 3, {"host"},
                          {"PICKLE_TIMEOUT=60", "PICKLE_PIPELINE_SCHEDULE=ordered", "PICKLE_COLL_CHUNK=4096",
                           "PICKLE_IPC_STREAMS=3"},
                          std::chrono::seconds(240)));
}

// Ranks that pass different counts to one allreduce, so that one takes the one-shot form and the other the fused
// pipeline: both fail at once with an error naming the allreduce, not after PICKLE_TIMEOUT.
TEST(Coll, AllreduceCountsThatDifferBetweenRanksFailEveryRankPromptly) {
  expect_all_ok(run_ranks("coll_count_mismatch", 2, {"host"}, {"PICKLE_TIMEOUT=20"}, std::chrono::seconds(90)));
}

// A peer that stays alive but skips a collective: the others' calls fail with a timeout naming it, their streams
// drain and their next calls fail at once (four ranks, the ordered schedule with many chunks: the survivors owe each
// other tokens when their calls fail, which the failed calls raise; three ranks with one-shot allreduces).
TEST(Coll, APeerThatSkipsACollectiveFailsTheOthersWithinTheTimeout) {
  expect_all_ok(run_ranks("coll_absent_peer", 4, {"host"}, {"PICKLE_TIMEOUT=5", "PICKLE_COLL_CHUNK=65536"},
                          std::chrono::seconds(90)));
  expect_all_ok(run_ranks("coll_absent_peer", 3, {"host"}, {"PICKLE_TIMEOUT=5", "PICKLE_ALLREDUCE_SCHEDULE=oneshot"},
                          std::chrono::seconds(90)));
}

// A peer that dies during ordered allreduces (four ranks: the three survivors await tokens from each other): every
// survivor's call fails within PICKLE_TIMEOUT and the next fails at once. A survivor whose call failed before it
// raised the tokens it owes holds its peers' waits until their timeout (docs/collectives.md, "Errors"): bounded.
TEST(Coll, APeerKilledDuringOrderedAllreducesFailsTheOthersWithinTheTimeout) {
  auto statuses = run_ranks("coll_peer_death", 4, {"host"},
                            {"PICKLE_TIMEOUT=10", "PICKLE_PIPELINE_SCHEDULE=ordered", "PICKLE_COLL_CHUNK=65536"},
                            std::chrono::seconds(90));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  for (std::size_t rank = 1; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}

TEST(Coll, AnUnknownAllreduceScheduleIsAClearError) {
  expect_all_ok(run_ranks("coll_bad_setting", 2, {"host", "PICKLE_ALLREDUCE_SCHEDULE"},
                          {"PICKLE_TIMEOUT=30", "PICKLE_ALLREDUCE_SCHEDULE=ring"}));
}

// Ranks that differ in working in place: in-place alltoall goes through the pipeline, out of place straight into
// recv, and both must send the same chunks in an order the other can match, with either pipeline schedule.
TEST(Coll, AlltoallsMatchWhenSomeRanksWorkInPlaceAndOthersDoNot) {
  for (const char* schedule : {"PICKLE_PIPELINE_SCHEDULE=staggered", "PICKLE_PIPELINE_SCHEDULE=ordered",
                               "PICKLE_PIPELINE_SCHEDULE=parallel"}) {
    for (int ranks : {4, 3}) {
      expect_all_ok(run_ranks("coll_alltoall_mixed_in_place", ranks, {"host"},
                              {"PICKLE_TIMEOUT=60", "PICKLE_COLL_CHUNK=4096", schedule}));
    }
  }
}

TEST(Coll, AnUnknownPipelineScheduleIsAClearError) {
  expect_all_ok(run_ranks("coll_bad_setting", 2, {"host", "PICKLE_PIPELINE_SCHEDULE"},
                          {"PICKLE_TIMEOUT=30", "PICKLE_PIPELINE_SCHEDULE=serial"}));
}

TEST(Coll, AnUnknownAllgatherScheduleIsAClearError) {
  expect_all_ok(run_ranks("coll_bad_setting", 2, {"host", "PICKLE_ALLGATHER_SCHEDULE"},
                          {"PICKLE_TIMEOUT=30", "PICKLE_ALLGATHER_SCHEDULE=rotated"}));
}

TEST(Coll, AnAllreduceScheduleSetOnOneRankAgreesOnlyWhenItIsTheDefault) {
  for (const char* value : {"auto", "phased"}) {
    expect_all_ok(run_ranks("coll_setting_on_one_rank", 2, {"host", "PICKLE_ALLREDUCE_SCHEDULE", value},
                            {"PICKLE_TIMEOUT=30"}));
  }
}

// Ordered ranks await tokens that only ordered ranks raise: the pipeline schedule must agree too.
TEST(Coll, APipelineScheduleSetOnOneRankAgreesOnlyWhenItIsTheDefault) {
  for (const char* value : {"staggered", "ordered", "parallel"}) {
    expect_all_ok(run_ranks("coll_setting_on_one_rank", 2, {"host", "PICKLE_PIPELINE_SCHEDULE", value},
                            {"PICKLE_TIMEOUT=30"}));
  }
}

// The mailboxes' form limits: a rank in the LL or the loads form polls for what only that form writes, so they must
// agree as well (spelled as the default, set on one rank only, they do).
TEST(Coll, TheMailboxFormLimitsSetOnOneRankAgreeOnlyWhenTheyAreTheDefault) {
  const std::pair<const char*, const char*> settings[] = {
      {"PICKLE_ALLREDUCE_LL_MAX", "131072"},     {"PICKLE_ALLREDUCE_LL_MAX", "0"},
      {"PICKLE_ALLREDUCE_LOADS_MAX", "4194304"}, {"PICKLE_ALLREDUCE_LOADS_MAX", "0"},
      {"PICKLE_ALLREDUCE_PUSH_MIN", "65536"},    {"PICKLE_ALLREDUCE_PUSH_MIN", "0"}};
  for (const auto& [variable, value] : settings) {
    SCOPED_TRACE(std::string(variable) + "=" + value);
    expect_all_ok(run_ranks("coll_setting_on_one_rank", 2, {"host", variable, value}, {"PICKLE_TIMEOUT=30"}));
  }
}

TEST(Coll, AChunkSettingThatDiffersBetweenRanksFailsCreationOnEveryRank) {
  expect_all_ok(run_ranks("coll_chunk_setting_differs", 2, {"host"}, {"PICKLE_TIMEOUT=30"}));
}

// A call that fails its arguments on one rank only: the other rank's call fails (timeout), and no ready signal of
// it may let the first rank's next call write into its buffer.
TEST(Coll, ALaterCallDoesNotWriteIntoTheBufferOfACallThatFailedOnOneRank) {
  expect_all_ok(run_ranks("coll_one_rank_fails_its_arguments", 2, {"host", "allgather"}, {"PICKLE_TIMEOUT=3"},
                          std::chrono::seconds(60)));
}
TEST(Coll, ALaterBroadcastDoesNotWriteIntoTheBufferOfOneThatFailedAtTheRoot) {
  expect_all_ok(run_ranks("coll_one_rank_fails_its_arguments", 2, {"host", "broadcast"}, {"PICKLE_TIMEOUT=3"},
                          std::chrono::seconds(60)));
}

TEST(Coll, TwoRanksAsThreadsOfOneProcessRunAllgathersThenAllreduces) {
  expect_all_ok(run_ranks("coll_two_ranks_as_threads", 1, {"host"}, {"PICKLE_TIMEOUT=30"}, std::chrono::seconds(90)));
}

// Blocks of 16 MiB and more: the own block is copied beside the sends (allgather.cpp, kOwnCopyBesideBytes).
TEST(Coll, AllgathersOfLargeBlocksCopyTheOwnBlockBesideTheSends) {
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 2, {"host", "24"}, {"PICKLE_TIMEOUT=60"}));
  expect_all_ok(run_ranks("coll_allgather_large_blocks", 3, {"host", "16"}, {"PICKLE_TIMEOUT=60"}));
}
TEST(Coll, BadArgumentsAreClearErrorsAndLeaveTheCollectivesUsable) {
  expect_all_ok(run_ranks("coll_errors", 3, {"host"}, {"PICKLE_TIMEOUT=30"}));
}

TEST(Coll, PeerKilledDuringAllreducesFailsEveryOtherRankPromptly) {
  auto statuses = run_ranks("coll_peer_death", 3, {"host"}, {"PICKLE_TIMEOUT=5"}, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  for (std::size_t rank = 1; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}

// A block that rank 2 never sent reaches rank 1 only through rank 0's reduction of it: rank 1's own messages all
// arrive, and its synchronize must still fail, naming rank 0 (it succeeded with the wrong sum before). Under the
// ordered pipeline rank 2's stream also drops the token that rank 1's copy into rank 0 waits for: rank 2 raises it
// from the host, and both ranks fail with what went wrong, not with a TimeoutError after PICKLE_TIMEOUT.
TEST(Coll, ABlockOneRankLostFailsTheThirdRankThatGotItsReducedResult) {
  for (const char* schedule : {"PICKLE_PIPELINE_SCHEDULE=staggered", "PICKLE_PIPELINE_SCHEDULE=ordered"}) {
    SCOPED_TRACE(schedule);
    expect_all_ok(run_ranks("coll_lost_block_reaches_a_third_rank", 3, {"host"},
                            {"PICKLE_TIMEOUT=60", "PICKLE_ALLREDUCE_SCHEDULE=fused", schedule}));
  }
}

TEST(Coll, PeerKilledAfterItsCallReturnedFailsTheStreamSynchronize) {
  auto statuses = run_ranks("coll_death_after_call", 2, {"host"}, {"PICKLE_TIMEOUT=10"}, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

// The check that finds the lost data runs once the stream has passed the call, from the stream's synchronize; a
// communicator destroyed before that runs it at teardown, and the stream still reports the error afterwards.
TEST(Coll, PeerKilledAfterItsCallReturnedFailsTheStreamSynchronizeAfterTheCommunicatorWent) {
  auto statuses =
      run_ranks("coll_death_after_call", 2, {"host", "destroy_first"}, {"PICKLE_TIMEOUT=10"}, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

// The root of a broadcast receives nothing, so a peer that died before it was ready shows only in the root's wait for
// its ready signal, which the failure released: the root's stream must still report it.
TEST(Coll, BroadcastRootsStreamReportsAPeerThatDiedBeforeItWasReady) {
  auto statuses = run_ranks("coll_broadcast_root_peer_dies_before_ready", 2, {"host"}, {"PICKLE_TIMEOUT=10"},
                            std::chrono::seconds(60));
  EXPECT_TRUE(statuses[0].ok()) << "rank 0 " << statuses[0].describe();
  EXPECT_EQ(statuses[1].signal, SIGKILL) << "rank 1 " << statuses[1].describe();
}

// Communicator::split: groups by color ranked by key, a rank of no group, groups that outlive their parent, and
// collectives and send/recv inside each group.
TEST(Coll, SplitMakesGroupsThatWorkOnTheirOwnAndOutliveTheirParent) {
  expect_all_ok(run_ranks("comm_split", 5, {"host"}, {"PICKLE_TIMEOUT=30"}, std::chrono::seconds(120)));
}

}  // namespace
}  // namespace pickle::test
