#pragma once
// The fixture of the GPU tests whose rank programs run in 2 processes on 2 GPUs (tests/comm's children with CUDA
// memory): each TEST skips with the reason when the machine has fewer GPUs, and checks every rank's exit.

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "device/backends.hpp"
#include "subprocess.hpp"

namespace pickle::test {

/// Base of a fixture of 2-GPU tests (`class CommCuda : public TwoGpuTest {};`, so that test names keep the suite's).
class TwoGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (device::cuda_device_count() < 2) {
      GTEST_SKIP() << "needs 2 GPUs: " << (device::cuda_device_count() == 0 ? device::cuda_unavailable_reason()
                                                                            : std::string("only 1 GPU"));
    }
  }

  /// Every rank exited 0; otherwise one failure per rank that did not, saying how it ended.
  static void expect_all_ok(const std::vector<ExitStatus>& statuses) {
    for (std::size_t rank = 0; rank < statuses.size(); ++rank) {
      EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
    }
  }
};

}  // namespace pickle::test
