// The collectives' pure parts: how a count is cut into blocks, and which reductions a communicator can run (checked
// before any message is posted, so that a refusal leaves the communicator usable).
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include <pickle/error.hpp>

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
