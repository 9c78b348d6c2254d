#pragma once
// The fixture of the GPU tests whose rank programs run in 2 processes (tests/comm's children with CUDA memory): on
// 2 GPUs, a rank on each; on a machine of one GPU, both ranks share it (the Communicator places ranks round robin
// when CUDA memory is asked for on fewer GPUs than ranks), so that every CUDA path still runs for real there. Each TEST
// skips with the reason when there is no GPU, and checks every rank's exit.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "device/backends.hpp"
#include "rank_statuses.hpp"
#include "subprocess.hpp"

namespace pickle::test {

/// Base of a fixture of 2-rank GPU tests (`class CommCuda : public TwoGpuTest {};`, so that test names keep the
/// suite's).
class TwoGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    const int gpus = device::cuda_device_count();
    if (gpus == 0) GTEST_SKIP() << "needs a GPU: " << device::cuda_unavailable_reason();
    if (gpus == 1) {
      std::printf("[info] one GPU: both ranks share GPU 0 (copies between them are device-to-device)\n");
    }
  }
};

/// Skips a test that forces the net transport in a build without libfabric, as the CPU net tests do: on the device
/// machine that means .deps/libfabric was not carried (scripts/device/carry_libfabric.sh).
#ifdef PICKLE_HAVE_LIBFABRIC
#define PICKLE_SKIP_WITHOUT_NET_TRANSPORT() \
  do {                                      \
  } while (false)
#else
#define PICKLE_SKIP_WITHOUT_NET_TRANSPORT() \
  GTEST_SKIP() << "built without libfabric (no net transport to force; apt-get install libfabric-dev, then reconfigure)"
#endif

}  // namespace pickle::test
