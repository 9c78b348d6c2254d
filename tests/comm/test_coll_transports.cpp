// The collectives over the shm and net transports (forced with PICKLE_TRANSPORT between host ranks of one machine):
// the rank programs of tests/comm/coll_children.cpp that the ipc transport runs in test_coll_host.cpp. Each transport
// completes sends differently (shm: the receiver copies out of a staging ring; net: RMA writes and control
// messages), and the collectives' ordering and failure handling must hold on each.
#include <gtest/gtest.h>

#include <signal.h>

#include "../mp/netns_pair.hpp"
#include "../mp/two_hosts.hpp"
#include "rank_statuses.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

std::vector<std::string> shm_env(const std::string& timeout) {
  return {"PICKLE_TIMEOUT=" + timeout, "PICKLE_TRANSPORT=shm", "PICKLE_SHM_CHUNK=65536"};
}
std::vector<std::string> net_env(const std::string& timeout) {
  return {"PICKLE_TIMEOUT=" + timeout, "PICKLE_TRANSPORT=net", "PICKLE_NET_IFACE=lo", "PICKLE_NET_CHUNK=65536",
          "PICKLE_NET_LANES=2"};
}

class CollOverNet : public testing::Test {
 protected:
  void SetUp() override {
#ifndef PICKLE_HAVE_LIBFABRIC
    GTEST_SKIP() << "built without libfabric (apt-get install libfabric-dev, then reconfigure)";
#endif
  }
};

/// The matrix of every collective on three ranks over `env`'s transport, with `settings` added.
void expect_matrix_matches(std::vector<std::string> env, const std::vector<std::string>& settings) {
  env.insert(env.end(), settings.begin(), settings.end());
  expect_all_ok(run_ranks("coll_matrix", 3, {"host"}, env, std::chrono::seconds(280)));
}

TEST(CollOverShm, EveryCollectiveTypeAndOperatorMatchesTheReference) {
  expect_matrix_matches(shm_env("60"), {});
}
TEST_F(CollOverNet, EveryCollectiveTypeAndOperatorMatchesTheReference) {
  expect_all_ok(run_ranks("coll_matrix", 2, {"host"}, net_env("60"), std::chrono::seconds(280)));
}
TEST_F(CollOverNet, StagedEveryCollectiveTypeAndOperatorMatchesTheReference) {
  expect_matrix_matches(net_env("60"), {"PICKLE_NET_STAGING=1"});
}

// Allreduce in two phases over the transports that do not write into the peer's memory from this rank's stream (the
// in-place case leans on Call::finish's waits for the reduce_scatter's sends before the allgather's peers write).
TEST(CollOverShm, ThePhasedAllreduceMatchesTheReference) {
  expect_matrix_matches(shm_env("60"), {"PICKLE_ALLREDUCE_SCHEDULE=phased"});
}
TEST_F(CollOverNet, StagedThePhasedAllreduceMatchesTheReference) {
  expect_matrix_matches(net_env("60"), {"PICKLE_NET_STAGING=1", "PICKLE_ALLREDUCE_SCHEDULE=phased"});
}

// The ordered pipeline schedule where sends do not copy on the side stream (shm: the transport's stream; staged net:
// a staging copy and a write): each token waits for its send's completion word first.
TEST(CollOverShm, TheOrderedPipelineScheduleMatchesTheReference) {
  expect_matrix_matches(shm_env("60"), {"PICKLE_PIPELINE_SCHEDULE=ordered"});
}
TEST_F(CollOverNet, StagedTheOrderedPipelineScheduleMatchesTheReference) {
  expect_matrix_matches(net_env("60"), {"PICKLE_NET_STAGING=1", "PICKLE_PIPELINE_SCHEDULE=ordered"});
}

// A collective's send whose net write is refused fails its pair on both sides: every rank's synchronize reports it,
// none goes on with a block that never came (found by review: the sending rank's call succeeded, its result wrong).
TEST_F(CollOverNet, AnAllreduceWhoseNetWriteIsRefusedFailsOnEveryRank) {
  expect_all_ok(run_ranks("coll_net_write_refused", 2, {"host"}, net_env("20"), std::chrono::seconds(90)));
}

// With three ranks the block that never came reaches a third rank through the reduction of the rank that missed it
// (fused allreduce): over net that rank refuses to write a result it computed without it, which fails the pair, so
// rank 2's call fails too (its own messages all arrived; it succeeded with a wrong sum before).
TEST_F(CollOverNet, AnAllreduceWhoseNetWriteIsRefusedFailsTheThirdRankToo) {
  auto env = net_env("20");
  env.insert(env.end(), {"PICKLE_ALLREDUCE_SCHEDULE=fused", "PICKLE_PIPELINE_SCHEDULE=staggered"});
  expect_all_ok(run_ranks("coll_net_write_refused", 3, {"host"}, env, std::chrono::seconds(90)));
}

// A block lost to a dropped send reaches a third rank through the reduction of the rank that missed it: that rank's
// call fails too (test_coll_host.cpp runs it over ipc).
// Both pipeline schedules: under the ordered one the dropped stream's tokens are raised from the host.
TEST(CollOverShm, ABlockOneRankLostFailsTheThirdRankThatGotItsReducedResult) {
  for (const char* schedule : {"PICKLE_PIPELINE_SCHEDULE=staggered", "PICKLE_PIPELINE_SCHEDULE=ordered"}) {
    SCOPED_TRACE(schedule);
    auto env = shm_env("60");
    env.insert(env.end(), {"PICKLE_ALLREDUCE_SCHEDULE=fused", schedule});
    expect_all_ok(run_ranks("coll_lost_block_reaches_a_third_rank", 3, {"host"}, env));
  }
}
TEST_F(CollOverNet, ABlockOneRankLostFailsTheThirdRankThatGotItsReducedResult) {
  for (const char* schedule : {"PICKLE_PIPELINE_SCHEDULE=staggered", "PICKLE_PIPELINE_SCHEDULE=ordered"}) {
    SCOPED_TRACE(schedule);
    auto env = net_env("60");
    env.insert(env.end(), {"PICKLE_ALLREDUCE_SCHEDULE=fused", schedule});
    expect_all_ok(run_ranks("coll_lost_block_reaches_a_third_rank", 3, {"host", "refused"}, env));
  }
}

// Peers write into a rank's receive buffer only once its stream has reached the call (the ready handshake, an empty
// send, must leave in stream order on every transport).
TEST(CollOverShm, PeersWriteOnlyAfterTheCallersEarlierStreamWork) {
  expect_all_ok(run_ranks("coll_ready_after_stream", 3, {"host"}, shm_env("30")));
}
TEST_F(CollOverNet, PeersWriteOnlyAfterTheCallersEarlierStreamWork) {
  expect_all_ok(run_ranks("coll_ready_after_stream", 3, {"host"}, net_env("30")));
}
TEST(CollOverIpc, PeersWriteOnlyAfterTheCallersEarlierStreamWork) {
  expect_all_ok(run_ranks("coll_ready_after_stream", 3, {"host"}, {"PICKLE_TIMEOUT=30"}));
}

// A dead peer fails every other rank within PICKLE_TIMEOUT, also where the collective dropped its send Requests but
// left its stream waiting on their completion words.
TEST(CollOverShm, PeerKilledDuringAllreducesFailsEveryOtherRankPromptly) {
  auto statuses = run_ranks("coll_peer_death", 3, {"host"}, shm_env("5"), std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  for (std::size_t rank = 1; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}
TEST_F(CollOverNet, PeerKilledDuringAllreducesFailsEveryOtherRankPromptly) {
  auto statuses = run_ranks("coll_peer_death", 3, {"host"}, net_env("10"), std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  for (std::size_t rank = 1; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}
// The staggered pipeline schedule (one side stream per lane for all peers) over staged net sends, whose staging
// copies wait on those shared streams: the matrix matches, and a peer's death fails the others promptly (the failed
// call's abandon joins the shared streams).
TEST_F(CollOverNet, TheStaggeredPipelineOverStagedSendsMatchesAndSurvivesAPeerDeath) {
  std::vector<std::string> env = net_env("30");
  env.insert(env.end(), {"PICKLE_NET_STAGING=1", "PICKLE_PIPELINE_SCHEDULE=staggered"});
  expect_all_ok(run_ranks("coll_matrix", 3, {"host"}, env, std::chrono::seconds(240)));
  env[0] = "PICKLE_TIMEOUT=10";  // 5 s was too short for the net set-up on a loaded 2-core machine
  auto statuses = run_ranks("coll_peer_death", 3, {"host"}, env, std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  for (std::size_t rank = 1; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}
TEST(CollOverShm, PeerKilledAfterItsCallReturnedFailsTheStreamSynchronize) {
  auto statuses = run_ranks("coll_death_after_call", 2, {"host"}, shm_env("10"), std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}
TEST_F(CollOverNet, PeerKilledAfterItsCallReturnedFailsTheStreamSynchronize) {
  auto statuses = run_ranks("coll_death_after_call", 2, {"host"}, net_env("10"), std::chrono::seconds(60));
  EXPECT_EQ(statuses[0].signal, SIGKILL) << "rank 0 " << statuses[0].describe();
  EXPECT_TRUE(statuses[1].ok()) << "rank 1 " << statuses[1].describe();
}

// A host-side send does not queue behind a collective's data that waits on the peer.
TEST(CollOverShm, AHostSendDoesNotWaitBehindACollective) {
  expect_all_ok(run_ranks("coll_send_not_behind_collective", 2, {"host"}, shm_env("5"), std::chrono::seconds(60)));
}
TEST_F(CollOverNet, AHostSendDoesNotWaitBehindACollective) {
  expect_all_ok(run_ranks("coll_send_not_behind_collective", 2, {"host"}, net_env("5"), std::chrono::seconds(60)));
}
TEST(CollOverIpc, AHostSendDoesNotWaitBehindACollective) {
  expect_all_ok(run_ranks("coll_send_not_behind_collective", 2, {"host"}, {"PICKLE_TIMEOUT=5"},
                          std::chrono::seconds(60)));
}

// Two "hosts" of two ranks each (two network namespaces, two processes in each): allreduce, broadcast, allgather and
// reduce_scatter go in two levels, copy engines (here: the host backend's ipc) inside a host and the network between
// the hosts, and send fewer bytes over the network than the direct algorithm; every collective still matches the
// reference, with hosts of consecutive ranks (0 1 | 2 3) and mirrored ones (0 3 | 1 2: the ranks of index 1 are 3
// and 2, not in host order).
TEST_F(CollOverNet, CollectivesAcrossTwoHostsOfTwoRanksGoInTwoLevels) {
  std::string why_not;
  auto pair = NetnsPair::create(&why_not, /*impaired=*/false);
  if (!pair) GTEST_SKIP() << why_not;
  struct Run {
    std::vector<std::string> program;
    std::string hierarchy;
    TwoHostLayout layout = TwoHostLayout::Blocked;
    std::string own_copy = "local";  // PICKLE_ALLGATHER_OWN_COPY
  };
  // With relay the byte counts must not change: a rank's block comes back from rank + 1 only over ipc (inside a
  // host), never over the network, and the two-level steps never relay.
  const std::vector<Run> runs = {
      {{"coll_two_levels", "host", "two"}, "1"},
      {{"coll_two_levels", "host", "direct"}, "0"},
      {{"coll_two_levels", "host", "two"}, "1", TwoHostLayout::Blocked, "relay"},
      {{"coll_two_levels", "host", "direct"}, "0", TwoHostLayout::Blocked, "relay"},
      {{"coll_matrix", "host", "2"}, "1"},
      {{"coll_matrix", "host", "2", "mirrored"}, "1", TwoHostLayout::Mirrored},
  };
  for (const auto& run : runs) {
    SCOPED_TRACE(run.program[0] + " " + run.program.back() + " " + run.own_copy);
    expect_all_ok(run_on_two_hosts(*pair, run.program, run.layout,
                                   {"PICKLE_TIMEOUT=60", "PICKLE_COLL_HIERARCHY=" + run.hierarchy,
                                    "PICKLE_ALLGATHER_OWN_COPY=" + run.own_copy},
                                   std::chrono::seconds(240)));
  }
}

// A two-level allreduce whose first net write on rank 0 (its across-hosts step's send) is refused: the rank of the
// other host that misses the block passes what it reduced without it to the other rank of its host, in the host
// step that follows, on another communicator (the host group's). Every rank must fail the call.
TEST_F(CollOverNet, ATwoLevelAllreduceWhoseNetWriteIsRefusedFailsEveryRank) {
  std::string why_not;
  auto pair = NetnsPair::create(&why_not, /*impaired=*/false);
  if (!pair) GTEST_SKIP() << why_not;
  for (const TwoHostLayout layout : {TwoHostLayout::Blocked, TwoHostLayout::Mirrored}) {
    SCOPED_TRACE(layout == TwoHostLayout::Blocked ? "blocked" : "mirrored");
    expect_all_ok(run_on_two_hosts(*pair, {"coll_net_write_refused", "host"}, layout,
                                   {"PICKLE_TIMEOUT=20", "PICKLE_COLL_HIERARCHY=1"},
                                   std::chrono::seconds(120)));
  }
  // After two broadcasts whose across-hosts step only some ranks run (the root is rank 0's partner on the other
  // host): every rank still numbers the allreduce alike.
  const std::pair<TwoHostLayout, std::string> after_broadcasts[] = {{TwoHostLayout::Blocked, "2"},
                                                                    {TwoHostLayout::Mirrored, "1"}};
  for (const auto& [layout, root] : after_broadcasts) {
    SCOPED_TRACE("after broadcasts from rank " + root);
    expect_all_ok(run_on_two_hosts(*pair, {"coll_net_write_refused", "host", root}, layout,
                                   {"PICKLE_TIMEOUT=20", "PICKLE_COLL_HIERARCHY=1"}, std::chrono::seconds(120)));
  }
}

}  // namespace
}  // namespace pickle::test
