// The gated reduction (ReduceGate, src/collectives/reduce.hpp) on one GPU, as the allreduce mailboxes use it: the
// kernel reads nothing before its wait passes, passes on either word (GPU memory or the host word a failed pair
// releases), compares cyclically, and writes its raise word once every CTA has read its inputs; in the mailboxes'
// loads form it first copies its input into its own cell and announces it, before it waits.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "collectives/reduce.hpp"
#include "device/cuda/kernel_launch.hpp"
#include "core/clock.hpp"
#include "cuda_test_util.hpp"
#include "device/backends.hpp"
#include "device/stream.hpp"

namespace pickle::coll {
namespace {

using test::cuda_ok;

constexpr std::size_t kCount = std::size_t{1} << 20;  // 4 MiB of float: every one of 8 CTAs has work
constexpr int kCtas = 8;

class GatedReduce : public testing::Test {
 protected:
  void SetUp() override {
    if (device::cuda_device_count() == 0) GTEST_SKIP() << "needs a GPU: " << device::cuda_unavailable_reason();
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    load_reduce_kernels(0);
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_ok(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate");
    for (auto*& buffer : buffers_) {
      cuda_ok(cudaMalloc(reinterpret_cast<void**>(&buffer), kCount * sizeof(float)), "cudaMalloc");
    }
    const std::vector<float> ones(kCount, 1.0f), twos(kCount, 2.0f);
    cuda_ok(cudaMemcpy(buffers_[0], ones.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(buffers_[1], twos.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemset(buffers_[2], 0, kCount * sizeof(float)), "cudaMemset");
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&device_words_), kWords * sizeof(std::uint32_t)), "cudaMalloc");
    cuda_ok(cudaMemset(device_words_, 0, kWords * sizeof(std::uint32_t)), "cudaMemset");
    cuda_ok(cudaHostAlloc(reinterpret_cast<void**>(&host_words_), kWords * sizeof(std::uint32_t), cudaHostAllocMapped),
            "cudaHostAlloc");
    cuda_ok(cudaMallocHost(reinterpret_cast<void**>(&fives_), kCount * sizeof(float)), "cudaMallocHost");
    for (std::size_t i = 0; i < kCount; ++i) fives_[i] = 5.0f;
    for (int i = 0; i < kWords; ++i) host_words_[i] = 0;
    cuda_ok(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_words_on_device_), host_words_, 0),
            "cudaHostGetDevicePointer");
  }

  void TearDown() override {
    if (stream_ == nullptr) return;
    release_everything();  // a test that failed with the kernel still waiting
    cudaStreamDestroy(stream_);
    cudaStreamDestroy(side_);
    for (auto* buffer : buffers_) cudaFree(buffer);
    cudaFree(device_words_);
    cudaFreeHost(host_words_);
    cudaFreeHost(fives_);
  }

  /// One wait (word 0 of each kind, for `expected`) and one raise (host word 1, of `raised`); device word 2 counts
  /// CTAs. On the fixture's stream, or on `on`; with `publish`'s publication when given.
  void launch(std::uint32_t expected, std::uint32_t raised, cudaStream_t on = nullptr,
              const ReduceGate* publish = nullptr) {
    test::wait_for_legacy_stream();  // the fixture's setup, before the kernel on its non-blocking stream
    ReduceTask task;
    task.type = DataType::F32;
    task.op = ReduceOp::Sum;
    task.nranks = 2;
    task.out = buffers_[2];
    task.inputs[0] = buffers_[0];
    task.inputs[1] = buffers_[1];
    task.ninputs = 2;
    task.count = kCount;
    ReduceGate gate = publish != nullptr ? *publish : ReduceGate{};
    gate.waits.add(device_words_, host_words_on_device_, expected);
    gate.raises = 1;
    gate.raise_word[0] = host_words_on_device_ + 1;
    gate.raise_value[0] = raised;
    gate.ctas_done = device_words_ + 2;
    launch_reduce_cuda(task, on != nullptr ? on : stream_, 0, kCtas, &gate);
  }

  /// Whether the stream finished within `seconds`. When it has not, releases the wait through both words first (so
  /// that no kernel outlives the test), then answers false.
  bool finished_within(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return true;
      if (status != cudaErrorNotReady) cuda_ok(status, "cudaStreamQuery");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    release_everything();
    return false;
  }

  void release_everything() {
    __atomic_store_n(&host_words_[4], host_words_[4] + (1u << 30), __ATOMIC_RELEASE);  // a pre-wait's
    __atomic_store_n(&host_words_[0], host_words_[0] + (1u << 30), __ATOMIC_RELEASE);
    cudaStreamSynchronize(stream_);
  }

  /// Sets device word 0 to `value` from the side stream (as a peer's stream write does), and waits for that. Through
  /// host word 3, allocated beforehand: allocating or freeing pinned memory now would wait for the whole device, the
  /// waiting kernel included.
  void write_device_word(std::uint32_t value, int index = 0) {
    host_words_[3] = value;
    cuda_ok(cudaMemcpyAsync(device_words_ + index, &host_words_[3], sizeof value, cudaMemcpyHostToDevice, side_),
            "cudaMemcpyAsync");
    cuda_ok(cudaStreamSynchronize(side_), "cudaStreamSynchronize");
  }

  std::uint32_t device_word(int index) {
    cuda_ok(cudaMemcpyAsync(&host_words_[3], device_words_ + index, sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                            side_),
            "cudaMemcpyAsync");
    cuda_ok(cudaStreamSynchronize(side_), "cudaStreamSynchronize");
    return host_words_[3];
  }

  std::uint32_t host_word(int index) const { return __atomic_load_n(&host_words_[index], __ATOMIC_ACQUIRE); }

  /// Overwrites the second input with 5s from the side stream (as a peer's copy into its cell), and waits for that.
  void write_second_input() {
    cuda_ok(cudaMemcpyAsync(buffers_[1], fives_, kCount * sizeof(float), cudaMemcpyHostToDevice, side_),
            "cudaMemcpyAsync");
    cuda_ok(cudaStreamSynchronize(side_), "cudaStreamSynchronize");
  }

  /// Elements of the output that are not `expected`.
  std::size_t wrong_outputs(float expected) {
    std::vector<float> out(kCount);
    cuda_ok(cudaMemcpy(out.data(), buffers_[2], kCount * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::size_t wrong = 0;
    for (float value : out) wrong += value != expected ? 1 : 0;
    return wrong;
  }

  static constexpr int kWords = 8;
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_ = nullptr;
  float* buffers_[3] = {};  // two inputs, the output
  std::uint32_t* device_words_ = nullptr;
  std::uint32_t* host_words_ = nullptr;
  std::uint32_t* host_words_on_device_ = nullptr;
  float* fives_ = nullptr;  // pinned, allocated before any kernel waits (see write_device_word)
};

// A gated launch takes no more CTAs than the GPU holds at once (its CTAs wait for each other through the peers): the
// kernel of 1024 threads fits at most two to an SM, at least one, so a GPU of as many SMs as kMaxGatedCtas holds
// every CTA a gated launch may ask for.
TEST_F(GatedReduce, KnowsHowManyOfItsCtasTheGpuHoldsAtOnce) {
  int sms = 0;
  cuda_ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  const int resident = resident_reduce_ctas(0);
  EXPECT_GE(resident, sms) << "fewer than one CTA per SM";
  EXPECT_LE(resident, 2 * sms) << "more than two CTAs of 1024 threads per SM";
  if (sms >= kMaxGatedCtas) {
    EXPECT_GE(resident, kMaxGatedCtas);
  }
  EXPECT_EQ(resident_reduce_ctas(0), resident) << "the answer changed";
}

TEST_F(GatedReduce, WaitsForItsDeviceWordThenReducesAndRaisesItsWord) {
  const std::uint64_t driver_launches = device::cuda::kernel_launches_through_driver();
  launch(7, 9);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "the reduction did not wait for its word";
  EXPECT_EQ(host_word(1), 0u) << "raised before its wait passed";
  write_device_word(6);  // behind: still waiting
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "a word behind the value let the reduction through";
  // The input that the word stands for comes now, after the launch: a kernel that read before its wait passed
  // would sum the old 2s.
  write_second_input();
  write_device_word(7);
  ASSERT_TRUE(finished_within(10)) << "the reduction did not see its device word reach the value";
  EXPECT_EQ(wrong_outputs(1.0f + 5.0f), 0u);
  EXPECT_EQ(host_word(1), 9u);
  EXPECT_EQ(device_word(2), 0u) << "the CTA count must be back at 0 for the next gated launch";
  // The next launch on the same CTA count waits and raises again.
  launch(8, 10);
  write_device_word(8);
  ASSERT_TRUE(finished_within(10));
  EXPECT_EQ(host_word(1), 10u);
  EXPECT_EQ(device::cuda::kernel_launches_through_driver(), driver_launches + 2)
      << "not launched through the driver (cuLaunchKernel)";
}

TEST_F(GatedReduce, PassesWhenAFailedPairReleasesTheHostWordAndComparesCyclically) {
  // Counts about to wrap: the wait is for 0xfffffff0, the release moves the host word 2^30 past it (to 0x3ffffff0,
  // numerically smaller) as Communicator::Impl::fail_peer_locked does; the device word never comes.
  constexpr std::uint32_t kExpected = 0xfffffff0u;
  __atomic_store_n(&host_words_[0], kExpected - 5, __ATOMIC_RELEASE);
  write_device_word(kExpected - 5);  // 0 would count as ahead of 0xfffffff0, cyclically
  launch(kExpected, kExpected);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "a host word behind the value let the reduction through";
  __atomic_store_n(&host_words_[0], kExpected + (1u << 30), __ATOMIC_RELEASE);
  ASSERT_TRUE(finished_within(10)) << "the reduction did not see its released host word";
  EXPECT_EQ(wrong_outputs(1.0f + 2.0f), 0u);
  EXPECT_EQ(host_word(1), kExpected);
  EXPECT_EQ(device_word(2), 0u);
}

TEST_F(GatedReduce, ASynchronizeThatTimesOutNamesTheKernelsWaitNotAnOlderStreamWait) {
  // A pickle stream whose last stream wait (passed long ago) is not what holds it: the gated kernel after it is.
  auto stream = device::make_stream(MemoryKind::Cuda, 0);
  host_words_[2] = 1;
  stream->wait_value(host_words_on_device_ + 2, 1);
  launch(7, 9, static_cast<cudaStream_t>(stream->native_handle()));
  stream->note_wait_in_kernel(device_words_, 7, 1);
  try {
    stream->synchronize_until(Deadline::after_seconds(0.5));
    FAIL() << "synchronize returned while the gated kernel waited";
  } catch (const TimeoutError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("a kernel waiting on 1 peer word(s), the last of them"), std::string::npos) << text;
    EXPECT_NE(text.find("for >= 7"), std::string::npos) << text;
    EXPECT_EQ(text.find("wait_value"), std::string::npos) << "named the older stream wait: " << text;
  }
  write_device_word(7);
  stream->synchronize_until(Deadline::after_seconds(10));
  EXPECT_EQ(wrong_outputs(1.0f + 2.0f), 0u);
  EXPECT_EQ(host_word(1), 9u);
}

// The loads form's publication: every CTA copies its share of the input into each destination (two here, as a call
// pushed to two peers has), and the last announces it (a device word and a host word, as the peers' filled words),
// all before the kernel waits for its own word; then a publication of odd bytes from an odd address (the byte path).
TEST_F(GatedReduce, PublishesItsInputAndAnnouncesItBeforeItWaits) {
  constexpr std::size_t kBytes = kCount * sizeof(float);
  // Two destinations, as a call pushed to two peers has: the own cell of a pulled call alone is one.
  char* cells[2] = {nullptr, nullptr};
  for (char*& cell : cells) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&cell), kBytes), "cudaMalloc");
    cuda_ok(cudaMemset(cell, 0, kBytes), "cudaMemset");
  }
  std::vector<char> seen(kBytes);
  char* staging = nullptr;  // pinned before any kernel waits (see write_device_word)
  cuda_ok(cudaMallocHost(reinterpret_cast<void**>(&staging), kBytes), "cudaMallocHost");
  const auto read_cell = [&](const char* cell) {
    cuda_ok(cudaMemcpyAsync(staging, cell, kBytes, cudaMemcpyDeviceToHost, side_), "cudaMemcpyAsync");
    cuda_ok(cudaStreamSynchronize(side_), "cudaStreamSynchronize");
    std::copy(staging, staging + kBytes, seen.begin());
  };
  ReduceGate publish;
  publish.publish_from = buffers_[0];  // ones
  publish.publishes = 2;
  publish.publish_to[0] = cells[0];
  publish.publish_to[1] = cells[1];
  publish.publish_bytes = kBytes;
  publish.announces = 2;
  publish.announce_word[0] = device_words_ + 1;
  publish.announce_word[1] = host_words_on_device_ + 2;
  publish.announce_value = 11;
  publish.ctas_published = device_words_ + 3;
  launch(7, 9, nullptr, &publish);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (host_word(2) != 11u && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(host_word(2), 11u) << "no announcement in the host word while the kernel waits";
  EXPECT_EQ(device_word(1), 11u) << "no announcement in the device word";
  EXPECT_EQ(device_word(3), 0u) << "the publication's CTA count must be back at 0 for the next gated launch";
  ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "the reduction did not wait for its word";
  const std::vector<float> ones(kCount, 1.0f);
  for (int d = 0; d < 2; ++d) {
    read_cell(cells[d]);
    EXPECT_EQ(std::memcmp(seen.data(), ones.data(), kBytes), 0) << "destination " << d << " does not hold the input";
  }
  write_device_word(7);
  ASSERT_TRUE(finished_within(10));
  EXPECT_EQ(wrong_outputs(1.0f + 2.0f), 0u);
  EXPECT_EQ(host_word(1), 9u);

  // 1001 bytes of the 2s from one byte in, to three bytes into the first cell and five into the second.
  const std::size_t starts[2] = {3, 5};
  publish.publish_from = reinterpret_cast<const char*>(buffers_[1]) + 1;
  publish.publish_to[0] = cells[0] + starts[0];
  publish.publish_to[1] = cells[1] + starts[1];
  publish.publish_bytes = 1001;
  publish.announce_value = 12;
  launch(8, 10, nullptr, &publish);
  write_device_word(8);
  ASSERT_TRUE(finished_within(10));
  EXPECT_EQ(host_word(2), 12u);
  std::vector<char> twos(kBytes);
  const std::vector<float> two_floats(kCount, 2.0f);
  std::memcpy(twos.data(), two_floats.data(), kBytes);
  const auto* one_bytes = reinterpret_cast<const char*>(ones.data());
  for (int d = 0; d < 2; ++d) {
    SCOPED_TRACE("destination " + std::to_string(d));
    read_cell(cells[d]);
    const std::size_t start = starts[d];
    EXPECT_EQ(std::memcmp(seen.data() + start, twos.data() + 1, 1001), 0) << "the odd publication's bytes differ";
    EXPECT_EQ(std::memcmp(seen.data(), one_bytes, start), 0) << "the odd publication wrote before its start";
    EXPECT_EQ(std::memcmp(seen.data() + start + 1001, one_bytes + start + 1001, 16), 0)
        << "the odd publication wrote past its end";
  }
  for (char* cell : cells) cudaFree(cell);
  cudaFreeHost(staging);
}

// The loads form's pre-wait (the peers have read this rank's cell of kMailboxDepth calls ago): nothing is published
// or announced before it passes, on the device word (device word 4) or, as a failed pair releases it, on the host
// word (host word 4).
TEST_F(GatedReduce, PublishesNothingBeforeItsPreWaitPasses) {
  char* cell = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&cell), 4096), "cudaMalloc");
  ReduceGate publish;
  publish.pre_waits.add(device_words_ + 4, host_words_on_device_ + 4, 3);
  publish.publish_from = buffers_[0];
  publish.publishes = 1;
  publish.publish_to[0] = cell;
  publish.publish_bytes = 4096;
  publish.announces = 1;
  publish.announce_word[0] = host_words_on_device_ + 2;
  publish.announce_value = 21;
  publish.ctas_published = device_words_ + 3;
  for (bool through_host : {false, true}) {
    SCOPED_TRACE(through_host ? "released through the host word" : "the device word");
    launch(through_host ? 5 : 4, 9, nullptr, &publish);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_NE(host_word(2), publish.announce_value) << "announced before the pre-wait passed";
    ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady);
    if (through_host) {
      __atomic_store_n(&host_words_[4], publish.pre_waits.value[0], __ATOMIC_RELEASE);
    } else {
      write_device_word(publish.pre_waits.value[0], 4);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (host_word(2) != publish.announce_value && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(host_word(2), publish.announce_value) << "no announcement after the pre-wait passed";
    write_device_word(through_host ? 5 : 4);  // the main wait
    ASSERT_TRUE(finished_within(10));
    publish.pre_waits.value[0] = 6;  // the second round waits for a later count
    publish.announce_value = 22;
  }
  cudaFree(cell);
}

}  // namespace
}  // namespace pickle::coll
