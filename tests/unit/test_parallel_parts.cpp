// sum_over_parts (tools/pickle/bench/parallel_parts.hpp): every index is visited exactly once, by contiguous parts of
// at least the minimum size, and the parts' results are summed.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/parallel_parts.hpp"

namespace pickle::bench {
namespace {

struct Cover {
  std::vector<std::atomic<int>> visits;
  std::mutex mutex;
  std::set<std::pair<std::size_t, std::size_t>> parts;
  explicit Cover(std::size_t n) : visits(n) {}
};

TEST(ParallelParts, EveryIndexOnceInContiguousPartsAndTheResultsSummed) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{100003}}) {
    for (int threads : {1, 2, 3, 16}) {
      for (std::size_t min_part : {std::size_t{1}, std::size_t{100}, std::size_t{1} << 20}) {
        Cover cover(n);
        const std::uint64_t sum = sum_over_parts(n, threads, min_part, [&](std::size_t begin, std::size_t end) {
          {
            std::lock_guard lock(cover.mutex);
            cover.parts.emplace(begin, end);
          }
          std::uint64_t s = 0;
          for (std::size_t i = begin; i < end; ++i) {
            cover.visits[i].fetch_add(1);
            s += i;
          }
          return s;
        });
        const std::string where = "n " + std::to_string(n) + ", threads " + std::to_string(threads) + ", min part " +
                                  std::to_string(min_part);
        EXPECT_EQ(sum, n == 0 ? 0 : n * (n - 1) / 2) << where;
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(cover.visits[i].load(), 1) << where << ", index " << i;
        EXPECT_LE(cover.parts.size(), static_cast<std::size_t>(threads)) << where;
        if (cover.parts.size() > 1) {
          for (const auto& [begin, end] : cover.parts) EXPECT_GE(end - begin, min_part) << where;
        }
        // Contiguous and in order: each part starts where the previous one ended.
        std::size_t next = 0;
        for (const auto& [begin, end] : cover.parts) {
          EXPECT_EQ(begin, next) << where;
          next = end;
        }
        EXPECT_EQ(next, n) << where;
      }
    }
  }
}

TEST(ParallelParts, CheckThreadsHonoursTheVariableAndRefusesBadValues) {
  ::setenv("PICKLE_BENCH_CHECK_THREADS", "5", 1);
  EXPECT_EQ(check_threads(4), 5);
  ::setenv("PICKLE_BENCH_CHECK_THREADS", "65", 1);
  EXPECT_THROW(check_threads(1), InvalidArgument);
  ::setenv("PICKLE_BENCH_CHECK_THREADS", "two", 1);
  EXPECT_THROW(check_threads(1), InvalidArgument);
  ::unsetenv("PICKLE_BENCH_CHECK_THREADS");
  const int threads = check_threads(1);
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, 16);
  EXPECT_EQ(check_threads(1000), 1);  // more ranks than CPUs: one thread each
}

}  // namespace
}  // namespace pickle::bench
