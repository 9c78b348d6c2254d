// The collectives' pure parts: how a count is cut into blocks, and which reductions a communicator can run (checked
// before any message is posted, so that a refusal leaves the communicator usable).
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include <pickle/error.hpp>

#include "collectives/ll_allreduce.hpp"
#include "collectives/pipeline.hpp"
#include "collectives/plumbing.hpp"
#include "collectives/reduce.hpp"

namespace pickle::coll {
namespace {

TEST(CollPlumbing, SplitBlocksCoversTheCountAndNonEmptyBlocksStartAligned) {
  for (std::size_t element : {1u, 2u, 4u, 8u}) {
    for (std::size_t count : {0u, 1u, 7u, 16u, 17u, 1000u, 4099u}) {
      for (int world : {1, 2, 3, 8}) {
        const Blocks blocks = split_blocks(count, element, world);
        ASSERT_EQ(blocks.length.size(), static_cast<std::size_t>(world));
        EXPECT_EQ(std::accumulate(blocks.length.begin(), blocks.length.end(), std::size_t{0}), count);
        for (int r = 0; r < world; ++r) {
          // Empty blocks (small counts) sit at the end and are never read.
          if (blocks.length[r] > 0) {
            EXPECT_EQ(blocks.offset[r] * element % 16, 0u) << "count " << count << " rank " << r;
          }
          if (r > 0) {
            EXPECT_EQ(blocks.offset[r], blocks.offset[r - 1] + blocks.length[r - 1]);
          }
        }
      }
    }
  }
}

// Which form an allreduce takes (allreduce.cpp): auto one-shot on one host while a rank sends at most 4 MiB in it,
// phased only
// from three ranks on one host with blocks of at least 32 MiB, else fused; forced phased wherever no block is empty;
// forced fused and one-shot always; a world of one fused.
TEST(CollPlumbing, AllreduceTakesTheFormTheScheduleSays) {
  using enum AllreduceAlgorithm;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t at_threshold = 3 * kPhasedAllreduceMinBlock / 4;  // f32 elements of 3 blocks of 32 MiB
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, at_threshold, 4, 3, true), Phased);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, at_threshold - 3, 4, 3, true), Fused);  // blocks just under
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, at_threshold, 4, 3, false), Fused);     // ranks on two hosts
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, 1024 * kMiB, 4, 2, true), Fused);       // two ranks: fused
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, 512 * kMiB, 4, 4, true), Phased);
  // Through the mailboxes: messages up to a cell, 4 MiB / (ranks - 1) in whole pages, on one host.
  const std::size_t cell4 = mailbox_cell_bytes(4);
  EXPECT_EQ(cell4, 1396736u);                                                          // 4 MiB / 3, in pages
  EXPECT_EQ(mailbox_cell_bytes(2), 4 * kMiB);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, kMiB, 4, 2, true), Mailbox);  // 4 MiB of f32 to one peer
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, kMiB + 1, 4, 2, true), Fused);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, cell4 / 4, 4, 4, true), Mailbox);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, cell4 / 4, 4, 4, false), Fused);  // ranks on two hosts
  // Past a cell but within one-shot's 4 MiB sent (the cell is rounded down to pages): the two-sided one-shot.
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, cell4 / 4 + 1, 4, 4, true), OneShot);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, kMiB / 3 + 1, 4, 4, true), Fused);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, 1, 8, 8, true), Mailbox);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Mailbox, 1, 8, 8, true), Mailbox);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Mailbox, 1, 8, 8, false), Fused);      // forced: as auto elsewhere
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Mailbox, 512 * kMiB, 4, 4, true), Phased);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::OneShot, 1, 4, 4, true), OneShot);    // the two-sided one-shot
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Fused, 512 * kMiB, 4, 4, true), Fused);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Fused, 16, 4, 4, true), Fused);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::OneShot, 512 * kMiB, 4, 4, true), OneShot);  // forced: any size
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Phased, 64, 4, 4, false), Phased);  // forced: any size, any hosts
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Phased, 64, 4, 2, true), Phased);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Phased, 5, 4, 4, true), Fused);  // 5 floats leave a block empty
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Phased, 1, 8, 2, true), Fused);
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::OneShot, 1024, 4, 1, true), Fused);  // a world of one
  EXPECT_EQ(allreduce_algorithm(AllreduceSchedule::Auto, 1, 4, 1, true), Fused);
}

// The pipeline's chunk rule (plumbing.cpp, ChunkLimits): on CUDA the whole block under 16 MiB, else a quarter of it
// rounded down to 16, 32 or 64 MiB (measured on 2 x H200, docs/results/2026-11-28b-h200x4.md); always within the
// scratch ceiling.
TEST(CollPlumbing, CudaChunksAreAQuarterOfALargeBlockWithin16And64MiB) {
  constexpr std::size_t MiB = 1u << 20;
  auto chunk_bytes = [](std::size_t block_bytes, int world, std::size_t fixed = 0) {
    return chunk_elements(MemoryKind::Cuda, block_bytes / 4, 4, world, fixed) * 4;
  };
  EXPECT_EQ(chunk_bytes(4096, 2), 4096u);
  EXPECT_EQ(chunk_bytes(8 * MiB, 2), 8 * MiB);     // under 16 MiB: one chunk, no larger scratch than the block
  EXPECT_EQ(chunk_bytes(32 * MiB, 2), 16 * MiB);   // a quarter would be 8 MiB: 16 MiB is the floor
  EXPECT_EQ(chunk_bytes(64 * MiB, 2), 16 * MiB);
  EXPECT_EQ(chunk_bytes(128 * MiB, 2), 32 * MiB);
  EXPECT_EQ(chunk_bytes(256 * MiB, 2), 64 * MiB);
  EXPECT_EQ(chunk_bytes(512 * MiB, 2), 64 * MiB);  // a quarter would be 128 MiB: 64 MiB is the ceiling
  // Between them, powers of two (few scratch layouts): a quarter of 150 MiB is 37.5 MiB, of 250 MiB 62.5 MiB.
  EXPECT_EQ(chunk_bytes(150 * MiB, 2), 32 * MiB);
  EXPECT_EQ(chunk_bytes(250 * MiB, 2), 32 * MiB);
  EXPECT_EQ(chunk_bytes(72 * MiB, 2), 16 * MiB);
  // 4 ranks: 4 stages x 3 peers of 64 MiB fit in the 1 GiB of scratch (768 MiB); 8 ranks: 4 x 7 share it, 36.6 MiB
  // each, rounded down to pages.
  EXPECT_EQ(chunk_bytes(512 * MiB, 4), 64 * MiB);
  EXPECT_EQ(chunk_bytes(512 * MiB, 8), (1024 * MiB / 28) / 4096 * 4096);
  EXPECT_EQ(chunk_bytes(512 * MiB, 2, 8 * MiB), 8 * MiB);  // PICKLE_COLL_CHUNK wins
}

// The fused allreduce of two ranks on CUDA cuts blocks of 8-16 MiB, and 2-byte types' blocks up to 64 MiB, finer (its
// last chunk's reduction is exposed), and keeps chunk_elements' chunks elsewhere.
TEST(CollPlumbing, TwoRankAllreduceChunksAreFinerForMidSizeBlocks) {
  constexpr std::size_t MiB = 1u << 20;
  auto chunk_bytes = [](std::size_t block_bytes, std::size_t element = 4) {
    return two_rank_allreduce_chunk_elements(block_bytes / element, element) * element;
  };
  EXPECT_EQ(chunk_bytes(4 * MiB), 4 * MiB);  // under 8 MiB: chunk_elements' whole block
  EXPECT_EQ(chunk_bytes(8 * MiB), 4 * MiB);  // halves
  EXPECT_EQ(chunk_bytes(16 * MiB), 8 * MiB);
  EXPECT_EQ(chunk_bytes(16 * MiB, 2), 8 * MiB);  // bf16 alike
  EXPECT_EQ(chunk_bytes(32 * MiB, 2), 8 * MiB);  // 2-byte types: 8 MiB below 64 MiB
  EXPECT_EQ(chunk_bytes(48 * MiB, 2), 8 * MiB);
  EXPECT_EQ(chunk_bytes(32 * MiB), 16 * MiB);  // 4-byte types: chunk_elements' 16 MiB
  EXPECT_EQ(chunk_bytes(64 * MiB, 2), 16 * MiB);
  EXPECT_EQ(chunk_bytes(64 * MiB), 16 * MiB);  // chunk_elements' quarter from 64 MiB
  EXPECT_EQ(chunk_bytes(256 * MiB), 64 * MiB);
  // Just over 16 MiB: three equal parts, not two of 8 MiB and a small last one.
  const std::size_t odd = chunk_bytes(16 * MiB + 4096, 2);
  EXPECT_EQ((16 * MiB + 4096 + odd - 1) / odd, 3u);
  EXPECT_LT(odd, 8 * MiB);
  // Odd blocks: whole pages, never less than one element.
  EXPECT_EQ(two_rank_allreduce_chunk_elements(((10 * MiB) + 12) / 4, 4) * 4 % 4096, 0u);
  EXPECT_GE(two_rank_allreduce_chunk_elements(1, 8), 1u);
}

// The LL form's flags and refreshes (ll_allreduce.hpp): a flag is never 0 (a cell's memory before its first call) and
// never repeats within 2^32 - 1 calls; a cell is written in full at its first LL call and then at least every
// kLlRefreshCalls of its calls, so that no line of it is ever old enough to carry the flag of a later call.
TEST(CollPlumbing, LlFlagsAreNeverZeroAndCellsAreWrittenInFullOftenEnough) {
  for (std::uint64_t number : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0xfffffffeu},
                               std::uint64_t{0xffffffffu}, std::uint64_t{0x100000000u}, std::uint64_t{0x1fffffffdu}}) {
    EXPECT_NE(ll_flag(number), 0u) << number;
    EXPECT_NE(ll_flag(number), ll_flag(number + 4)) << number;
    EXPECT_NE(ll_flag(number), ll_flag(number + kLlRefreshCalls + 4)) << number;
  }
  EXPECT_EQ(ll_flag(0), ll_flag(0xffffffffu)) << "flags repeat every 2^32 - 1 calls";

  std::uint64_t refreshed = kLlNeverRefreshed;
  EXPECT_TRUE(take_ll_refresh(refreshed, 10)) << "a cell's first LL call, whenever it comes";
  EXPECT_EQ(refreshed, 10u);
  EXPECT_FALSE(take_ll_refresh(refreshed, 14));
  EXPECT_FALSE(take_ll_refresh(refreshed, 10 + kLlRefreshCalls - 4));
  EXPECT_TRUE(take_ll_refresh(refreshed, 10 + kLlRefreshCalls + 2)) << "the first call at least 2^30 after";
  EXPECT_EQ(refreshed, 10 + kLlRefreshCalls + 2);
  EXPECT_FALSE(take_ll_refresh(refreshed, 10 + kLlRefreshCalls + 6));
  // However the cell's calls are spaced (other forms between them), none of its lines is older than a refresh
  // period plus the gap to the next LL call, far from the 2^32 - 1 at which a flag comes back.
  std::uint64_t last_full = 0;
  refreshed = kLlNeverRefreshed;
  for (std::uint64_t number = 3; number < 5 * kLlRefreshCalls; number += 4 * 12345679) {
    if (take_ll_refresh(refreshed, number)) last_full = number;
    ASSERT_LT(number - last_full, kLlRefreshCalls + 4 * 12345679) << number;
  }
}

// The LL form's CTAs (ll_ctas_for): one per 16 KiB share of the call, never none, never more than the gated kernels'
// budget (PICKLE_REDUCE_CTAS, kMaxGatedCtas); the largest call fits in kMaxGatedCtas shares.
TEST(CollPlumbing, LlCallsTakeACtaPerShareWithinTheBudget) {
  EXPECT_EQ(ll_ctas_for(1, 8), 1);
  EXPECT_EQ(ll_ctas_for(kLlCtaBytes, 8), 1);
  EXPECT_EQ(ll_ctas_for(kLlCtaBytes + 1, 8), 2);
  EXPECT_EQ(ll_ctas_for(64 << 10, 8), 4);
  EXPECT_EQ(ll_ctas_for(kLlMaxBytes, 8), 8) << "PICKLE_REDUCE_CTAS's default bounds it";
  EXPECT_EQ(ll_ctas_for(kLlMaxBytes, kMaxGatedCtas), static_cast<int>(kLlMaxBytes / kLlCtaBytes));
  EXPECT_LE(static_cast<int>(kLlMaxBytes / kLlCtaBytes), kMaxGatedCtas);
  EXPECT_EQ(ll_ctas_for(100 << 10, 1), 1);
  EXPECT_EQ(ll_ctas_for(100 << 10, 0), 1) << "never none";
  EXPECT_EQ(ll_ctas_for(0, 8), 1);
}

// When the LL form's watchers read the peers' host words (ReleaseReads): never in a call's first 50 us, then 1, 2, 4,
// ... us apart up to 64 us; at once after the timer jumps back; every 8192 turns even with the timer stalled.
TEST(CollPlumbing, LlWatchersReadHostWordsOnlyOnceACallGoesOnLong) {
  using R = ReleaseReads;
  constexpr unsigned long long kStart = 1'000'000;
  R reads(kStart);
  unsigned turn = 1;
  EXPECT_FALSE(reads.due(kStart, turn++));
  EXPECT_FALSE(reads.due(kStart + R::kQuietNs - 1, turn++)) << "a call in step ends before any read";
  unsigned long long now = kStart + R::kQuietNs;
  EXPECT_TRUE(reads.due(now, turn++));
  std::vector<unsigned long long> gaps;
  for (int i = 0; i < 10; ++i) {
    unsigned long long next = now + 100;  // a turn of the watcher's loop: about 100 ns
    while (!reads.due(next, turn++)) next += 100;
    gaps.push_back(next - now);
    now = next;
  }
  EXPECT_EQ(gaps, (std::vector<unsigned long long>{1'000, 2'000, 4'000, 8'000, 16'000, 32'000, 64'000, 64'000, 64'000,
                                                   64'000}));
  EXPECT_TRUE(reads.due(now - 5, turn++)) << "a timer that jumps back reads at once";

  R stalled(kStart);
  int read_at = 0;
  for (unsigned t = 1; t <= 3 * R::kTurnsPerForcedRead; ++t) {
    if (stalled.due(kStart, t)) {
      ++read_at;
      EXPECT_EQ(t % R::kTurnsPerForcedRead, 0u) << t;
    }
  }
  EXPECT_EQ(read_at, 3) << "a stalled timer still reads every 8192 turns";
}

TEST(CollPlumbing, HostChunksAreAnEighthOfTheBlockWithin64KiBAnd1MiB) {
  auto chunk_bytes = [](std::size_t block_bytes) {
    return chunk_elements(MemoryKind::Host, block_bytes / 4, 4, 2) * 4;
  };
  EXPECT_EQ(chunk_bytes(4096), 64u << 10);
  EXPECT_EQ(chunk_bytes(4u << 20), 512u << 10);
  EXPECT_EQ(chunk_bytes(64u << 20), 1u << 20);
}

TEST(CollPlumbing, ACudaReductionOverMoreRanksThanTheKernelTakesIsRefusedByName) {
  const OpContext ctx{.rank = 3, .op = "allreduce", .bytes = 4096};
  EXPECT_NO_THROW(check_reduction_fits(ctx, MemoryKind::Cuda, kMaxReduceInputs));
  EXPECT_NO_THROW(check_reduction_fits(ctx, MemoryKind::Host, 4 * kMaxReduceInputs));  // the host has no limit
  try {
    check_reduction_fits(ctx, MemoryKind::Cuda, kMaxReduceInputs + 1);
    FAIL() << "a CUDA reduction of " << kMaxReduceInputs + 1 << " inputs was accepted";
  } catch (const UnavailableError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 3"), std::string::npos) << what;
    EXPECT_NE(what.find("allreduce"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(kMaxReduceInputs + 1)), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace pickle::coll
