// A net signal is released once every put its sender issued before it has landed, not once as many puts as that
// have: puts land out of order (lanes, rails, streams).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "comm/landed_prefix.hpp"

namespace pickle::comm {
namespace {

TEST(LandedPrefix, ALaterPutLandingFirstDoesNotCountForAnEarlierOne) {
  LandedPrefix landed;
  landed.land(1);  // put 1 is here, put 0 is not: a signal sent after put 0 must still wait
  EXPECT_EQ(landed.count(), 0u);
  EXPECT_EQ(landed.out_of_order(), 1u);
  landed.land(3);
  EXPECT_EQ(landed.count(), 0u);
  landed.land(0);
  EXPECT_EQ(landed.count(), 2u);  // 0 and 1; 3 waits for 2
  landed.land(2);
  EXPECT_EQ(landed.count(), 4u);
  EXPECT_EQ(landed.out_of_order(), 0u);
}

TEST(LandedPrefix, AnyOrderOfManyPutsEndsWithAllCounted) {
  std::vector<std::uint32_t> order(5000);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937 random(7);
  // Shuffled within windows of 64, as puts in flight on several lanes land.
  for (std::size_t start = 0; start < order.size(); start += 64) {
    std::shuffle(order.begin() + start, order.begin() + std::min(order.size(), start + 64), random);
  }
  LandedPrefix landed;
  std::vector<bool> here(order.size(), false);
  std::size_t first_missing = 0;
  for (std::uint32_t put : order) {
    landed.land(put);
    here[put] = true;
    while (first_missing < here.size() && here[first_missing]) ++first_missing;
    ASSERT_EQ(landed.count(), first_missing) << "after put " << put;
  }
  EXPECT_EQ(landed.count(), order.size());
  EXPECT_EQ(landed.out_of_order(), 0u);
}

TEST(LandedPrefix, SequenceNumbersWrapAtTwoToTheThirtyOne) {
  constexpr std::uint64_t kTarget = 0x80000000ull - 2;
  LandedPrefix landed(kTarget);  // puts 0 .. 2^31 - 3 landed
  landed.land(0);  // put 2^31 (its id wraps to 0) lands before 2^31 - 2 and 2^31 - 1
  EXPECT_EQ(landed.count(), kTarget);
  landed.land(0x7fffffffu);
  landed.land(0x7ffffffeu);
  EXPECT_EQ(landed.count(), 0x80000000ull + 1);
}

}  // namespace
}  // namespace pickle::comm
