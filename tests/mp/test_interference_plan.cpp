// `pickle bench interference` with any number of ranks: who takes part and measures in each background
// (interference_plan.hpp: p2p is rank 0 -> rank 1, an allgather has all N ranks measure), the buffers each rank needs,
// the sizes that N ranks cannot share and the one note about them, and whether the machine can give the figures (a
// GPU per rank, or --share-gpus and its note). Plain functions: no GPU needed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/interference_options.hpp"
#include "../../tools/pickle/bench/interference_plan.hpp"

namespace pickle::test {
namespace {

using bench::BackgroundRoles;
using bench::InterferencePlan;

constexpr std::size_t kMiB = std::size_t{1} << 20;

bench::InterferenceOptions options_of(const std::vector<std::string>& args) {
  return bench::parse_interference_options(args);
}

TEST(InterferencePlan, P2pIsRankZeroToRankOneAndOnlyRankOneMeasures) {
  const BackgroundRoles p2p = InterferencePlan(options_of({}), 4).roles("p2p");
  EXPECT_TRUE(p2p.p2p);
  EXPECT_EQ(p2p.ranks, 2);
  EXPECT_TRUE(p2p.takes_part(0));
  EXPECT_TRUE(p2p.takes_part(1));
  EXPECT_FALSE(p2p.takes_part(2));
  EXPECT_FALSE(p2p.measures(0));
  EXPECT_TRUE(p2p.measures(1));
  EXPECT_FALSE(p2p.measures(2));
  EXPECT_EQ(p2p.send_bytes(0, 4 * kMiB), 4 * kMiB);
  EXPECT_EQ(p2p.send_bytes(1, 4 * kMiB), 0u);
  EXPECT_EQ(p2p.recv_bytes(0, 4 * kMiB), 0u);
  EXPECT_EQ(p2p.recv_bytes(1, 4 * kMiB), 4 * kMiB);
  EXPECT_TRUE(p2p.runs_size(4097));  // p2p runs any size
}

TEST(InterferencePlan, AnAllgatherOfNRanksHasEveryOneMeasureAndShareTheSize) {
  const BackgroundRoles allgather = InterferencePlan(options_of({"--background", "allgather"}), 4).roles("allgather");
  EXPECT_FALSE(allgather.p2p);
  EXPECT_EQ(allgather.ranks, 4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(allgather.takes_part(rank)) << rank;
    EXPECT_TRUE(allgather.measures(rank)) << rank;
    // The size is the gathered total: each rank sends a quarter and receives the whole.
    EXPECT_EQ(allgather.send_bytes(rank, 8 * kMiB), 2 * kMiB) << rank;
    EXPECT_EQ(allgather.recv_bytes(rank, 8 * kMiB), 8 * kMiB) << rank;
  }
  EXPECT_FALSE(allgather.takes_part(4));
  EXPECT_FALSE(allgather.measures(4));
  EXPECT_EQ(allgather.send_bytes(4, 8 * kMiB), 0u);
  EXPECT_TRUE(allgather.runs_size(8 * kMiB));
  EXPECT_TRUE(allgather.runs_size(12));
  EXPECT_FALSE(allgather.runs_size(8 * kMiB + 2));  // even, but not a multiple of 4
}

TEST(InterferencePlan, RanksDefaultToTheWorldAndMayNotExceedIt) {
  EXPECT_EQ(InterferencePlan(options_of({"--background", "allgather"}), 8).allgather_ranks(), 8);
  EXPECT_EQ(InterferencePlan(options_of({"--background", "allgather", "--ranks", "3"}), 8).allgather_ranks(), 3);
  EXPECT_EQ(InterferencePlan(options_of({"--background", "allgather", "--ranks", "8"}), 8).allgather_ranks(), 8);
  try {
    InterferencePlan(options_of({"--background", "allgather", "--ranks", "9"}), 8);
    ADD_FAILURE() << "--ranks 9 in a job of 8 must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--ranks 9: the job has 8 ranks"), std::string::npos) << e.what();
  }
  // p2p alone involves ranks 0 and 1 whatever the world; an allgather all of its ranks.
  EXPECT_EQ(InterferencePlan(options_of({}), 8).ranks_taking_part(), 2);
  EXPECT_EQ(InterferencePlan(options_of({"--background", "p2p,allgather"}), 8).ranks_taking_part(), 8);
  EXPECT_EQ(InterferencePlan(options_of({"--background", "allgather", "--ranks", "2"}), 8).ranks_taking_part(), 2);
}

TEST(InterferencePlan, OneBufferOfEachServesEveryBackground) {
  // p2p and a 4-rank allgather in a job of 6: rank 0 sends whole messages (p2p) and quarters (allgather); every
  // allgather rank receives whole ones; ranks 4 and 5 take no part and get nothing.
  const InterferencePlan plan(options_of({"--background", "p2p,allgather", "--ranks", "4"}), 6);
  const std::size_t capacity = 16 * kMiB;
  EXPECT_EQ(plan.send_need(0, capacity), capacity);
  EXPECT_EQ(plan.recv_need(0, capacity), capacity);
  EXPECT_EQ(plan.send_need(1, capacity), capacity / 4);
  EXPECT_EQ(plan.recv_need(1, capacity), capacity);
  EXPECT_EQ(plan.send_need(3, capacity), capacity / 4);
  EXPECT_TRUE(plan.takes_part(3));
  EXPECT_TRUE(plan.measures(0));
  EXPECT_FALSE(plan.takes_part(4));
  EXPECT_FALSE(plan.measures(5));
  EXPECT_EQ(plan.send_need(4, capacity) + plan.recv_need(4, capacity), 0u);

  // p2p alone: only rank 0 sends and only rank 1 receives, as before allgather had N ranks.
  const InterferencePlan p2p(options_of({}), 4);
  EXPECT_EQ(p2p.send_need(0, capacity), capacity);
  EXPECT_EQ(p2p.recv_need(0, capacity), 0u);
  EXPECT_EQ(p2p.send_need(1, capacity), 0u);
  EXPECT_EQ(p2p.recv_need(1, capacity), capacity);
  EXPECT_FALSE(p2p.takes_part(2));
  EXPECT_FALSE(p2p.measures(0));
}

TEST(InterferencePlan, SizesThatNRanksCannotShareAreSkippedWithOneNote) {
  const std::vector<std::size_t> sizes = {4096, 12288, 16384, 24576};  // multiples of 3: 12288 and 24576
  const InterferencePlan three(options_of({"--background", "p2p,allgather", "--ranks", "3"}), 3);
  EXPECT_EQ(three.skipped_sizes_note(sizes),
            "allgather skips 2 of 4 sizes: each of its 3 ranks contributes size/3 bytes, so a size must be a multiple "
            "of 3");
  // Rows per foreground: p2p runs 4 sizes, the allgather 2, each through both backends.
  EXPECT_EQ(three.rows_per_foreground(sizes), (4u + 2u) * 2u);

  const InterferencePlan two(options_of({"--background", "allgather"}), 2);
  EXPECT_EQ(two.skipped_sizes_note(sizes), "");
  EXPECT_NE(two.skipped_sizes_note({4096, 4097}).find("skips 1 of 2 sizes"), std::string::npos);
  EXPECT_EQ(two.rows_per_foreground({4096, 4097}), 2u);  // 4096 only, pickle and nccl
  // Without an allgather nothing is skipped, however many ranks.
  EXPECT_EQ(InterferencePlan(options_of({}), 3).skipped_sizes_note({4097}), "");
}

TEST(InterferencePlan, EachRankNeedsAGpuUnlessTheyShare) {
  const bench::InterferenceOptions plain = options_of({});
  const bench::InterferenceOptions shared = options_of({"--share-gpus"});
  EXPECT_EQ(bench::interference_waiver(plain, 2, 0), "needs 2 CUDA GPUs (found 0)");
  EXPECT_EQ(bench::interference_waiver(plain, 2, 1), "needs 2 CUDA GPUs (found 1)");
  EXPECT_EQ(bench::interference_waiver(plain, 2, 2), "");
  const std::string eight = bench::interference_waiver(plain, 8, 2);
  EXPECT_EQ(eight.rfind("needs 8 CUDA GPUs, one for each of the 8 ranks taking part (found 2)", 0), 0u) << eight;
  EXPECT_NE(eight.find("--share-gpus"), std::string::npos) << eight;
  EXPECT_EQ(bench::interference_waiver(plain, 8, 8), "");
  EXPECT_EQ(bench::interference_waiver(shared, 8, 1), "");
  EXPECT_EQ(bench::interference_waiver(shared, 2, 0), "needs a CUDA GPU (found 0)");

  const std::string note = bench::gpu_sharing_note(4, 1);
  EXPECT_NE(note.find("4 ranks share 1 GPU "), std::string::npos) << note;
  EXPECT_NE(note.find("not interference figures"), std::string::npos) << note;
  EXPECT_NE(bench::gpu_sharing_note(3, 2).find("3 ranks share 2 GPUs"), std::string::npos);
  EXPECT_EQ(bench::gpu_sharing_note(4, 4), "");
  EXPECT_EQ(bench::gpu_sharing_note(2, 8), "");
  EXPECT_EQ(bench::gpu_sharing_note(2, 0), "");  // no GPU: the waiver speaks instead
}

}  // namespace
}  // namespace pickle::test
