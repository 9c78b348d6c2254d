// The bench suites' note for ranks that share one GPU: their times measure no link, and the table and the JSON must
// say so (docs/bench.md). Ranks are told apart by host and PCI bus id; ranks without a GPU in the run never match.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../tools/pickle/bench/cuda_device.hpp"

namespace pickle::bench {
namespace {

TEST(BenchGpuSharing, RanksOnDifferentGpusOrHostsGetNoNote) {
  EXPECT_EQ(shared_gpu_note({}), "");
  EXPECT_EQ(shared_gpu_note({"a boot 1 netns 2 0000:18:00.0", "a boot 1 netns 2 0000:2A:00.0"}), "");
  EXPECT_EQ(shared_gpu_note({"a boot 1 netns 2 0000:18:00.0", "b boot 3 netns 4 0000:18:00.0"}), "");
  // Ranks without a GPU in the run (host memory, or idle ranks) report nothing, and nothing is not a GPU.
  EXPECT_EQ(shared_gpu_note({"", "", ""}), "");
}

TEST(BenchGpuSharing, TwoRanksOnOneGpuAreNamedWithTheGpu) {
  const std::string note = shared_gpu_note(
      {"a boot 1 netns 2 0000:18:00.0", "a boot 1 netns 2 0000:2A:00.0", "a boot 1 netns 2 0000:18:00.0"});
  EXPECT_NE(note.find("ranks 0 and 2 share one GPU (0000:18:00.0)"), std::string::npos) << note;
  EXPECT_NE(note.find("measure no link"), std::string::npos) << note;
}

}  // namespace
}  // namespace pickle::bench
