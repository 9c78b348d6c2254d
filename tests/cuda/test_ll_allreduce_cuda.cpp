// The mailboxes' LL kernel (src/collectives/ll_allreduce.hpp) on one GPU, with its peers played by the test: rank 1
// of 3, whose peers' cells the test fills with flagged lines and whose pushes into the peers' cells it reads back.
// The kernel reduces in rank order exactly as the host reference does (every type, partial last lines, in place at
// unaligned addresses, on one CTA and on several), writes its own lines with the call's flag (all of a cell's lines
// when asked to), waits for lines that carry an older flag, ends its polls when a failed pair releases the peer's host
// word (and not at the peer's ordinary count), announces and raises once (the last CTA, leaving the CTA counts at 0).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "collectives/ll_allreduce.hpp"
#include "collectives/reduce.hpp"
#include "device/cuda/kernel_launch.hpp"
#include "cuda_test_util.hpp"
#include "device/backends.hpp"

namespace pickle::coll {
namespace {

using test::cuda_ok;

constexpr int kRanks = 3, kRank = 1;
constexpr std::size_t kCellBytes = ll_cell_bytes_for(kLlMaxBytes);
constexpr std::uint32_t kFlag = 77, kFilled = 1000;
constexpr std::uint32_t kOlderFlag = kFlag - 4;  // the flag of the cell's call kMailboxDepth calls before

/// The lines that carry `data` with `flag`: {4 bytes, flag, 4 bytes, flag}, the last line's missing bytes zero.
std::vector<std::uint8_t> flagged_lines(const std::vector<std::uint8_t>& data, std::uint32_t flag) {
  const std::size_t lines = ll_lines(data.size());
  std::vector<std::uint8_t> image(lines * kLlLineBytes, 0);
  for (std::size_t line = 0; line < lines; ++line) {
    for (std::size_t half = 0; half < 2; ++half) {
      std::uint8_t* at = image.data() + line * kLlLineBytes + half * 8;
      for (std::size_t k = 0; k < 4; ++k) {
        const std::size_t from = line * kLlLineData + half * 4 + k;
        if (from < data.size()) at[k] = data[from];
      }
      std::memcpy(at + 4, &flag, 4);
    }
  }
  return image;
}

/// `bytes` of varied values, distinct per seed, valid as every type (small integers' and floats' bit patterns).
std::vector<std::uint8_t> input_bytes(DataType type, std::size_t count, int seed) {
  std::vector<std::uint8_t> bytes(count * datatype_size(type));
  for (std::size_t i = 0; i < count; ++i) {
    const auto v = static_cast<std::int64_t>((i * 7 + static_cast<std::size_t>(seed) * 13) % 29) - 14;
    std::uint8_t* at = bytes.data() + i * datatype_size(type);
    switch (type) {
      case DataType::F32: {
        const float f = static_cast<float>(v) * 0.5f;
        std::memcpy(at, &f, 4);
        break;
      }
      case DataType::F64: {
        const double d = static_cast<double>(v) * 0.25;
        std::memcpy(at, &d, 8);
        break;
      }
      case DataType::F16: {
        const std::uint16_t h = float_to_half_bits(static_cast<float>(v));
        std::memcpy(at, &h, 2);
        break;
      }
      case DataType::BF16: {
        const std::uint16_t b = float_to_bf16_bits(static_cast<float>(v));
        std::memcpy(at, &b, 2);
        break;
      }
      case DataType::I32: {
        const auto x = static_cast<std::int32_t>(v);
        std::memcpy(at, &x, 4);
        break;
      }
      case DataType::I64:
        std::memcpy(at, &v, 8);
        break;
      case DataType::U8:
        *at = static_cast<std::uint8_t>(v + 14);
        break;
    }
  }
  return bytes;
}

class LlAllreduceKernel : public testing::Test {
 protected:
  void SetUp() override {
    if (device::cuda_device_count() == 0) GTEST_SKIP() << "needs a GPU: " << device::cuda_unavailable_reason();
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    load_ll_allreduce_kernels(0);
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_ok(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&buffer_), kLlMaxBytes + 64), "cudaMalloc");
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&out_), kLlMaxBytes), "cudaMalloc");
    for (int r = 0; r < kRanks; ++r) {
      cuda_ok(cudaMalloc(reinterpret_cast<void**>(&pull_[r]), kCellBytes), "cudaMalloc");
      cuda_ok(cudaMalloc(reinterpret_cast<void**>(&push_[r]), kCellBytes), "cudaMalloc");
    }
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&device_words_), 4 * sizeof(std::uint32_t)), "cudaMalloc");
    cuda_ok(cudaHostAlloc(reinterpret_cast<void**>(&host_words_), 4 * sizeof(std::uint32_t), cudaHostAllocMapped),
            "cudaHostAlloc");
    cuda_ok(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_words_on_device_), host_words_, 0),
            "cudaHostGetDevicePointer");
    // Pinned before any kernel waits: allocating pinned memory then would wait for the whole device.
    cuda_ok(cudaMallocHost(reinterpret_cast<void**>(&late_lines_), kCellBytes), "cudaMallocHost");
    clear();
  }

  void TearDown() override {
    if (stream_ == nullptr) return;
    release(0);
    release(2);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    cudaStreamDestroy(side_);
    cudaFree(buffer_);
    cudaFree(out_);
    for (int r = 0; r < kRanks; ++r) {
      cudaFree(pull_[r]);
      cudaFree(push_[r]);
    }
    cudaFree(device_words_);
    cudaFreeHost(host_words_);
    cudaFreeHost(late_lines_);
  }

  void clear() {
    for (int r = 0; r < kRanks; ++r) {
      cuda_ok(cudaMemset(pull_[r], 0, kCellBytes), "cudaMemset");
      cuda_ok(cudaMemset(push_[r], 0, kCellBytes), "cudaMemset");
    }
    cuda_ok(cudaMemset(out_, 0xA5, kLlMaxBytes), "cudaMemset");  // no result of an earlier case passes for this one's
    cuda_ok(cudaMemset(device_words_, 0, 4 * sizeof(std::uint32_t)), "cudaMemset");
    for (int i = 0; i < 4; ++i) __atomic_store_n(&host_words_[i], 0u, __ATOMIC_RELEASE);
  }

  /// Peer `peer`'s lines of `data` with `flag`, in this rank's cell of it.
  void fill_peer_cell(int peer, const std::vector<std::uint8_t>& data, std::uint32_t flag) {
    const std::vector<std::uint8_t> image = flagged_lines(data, flag);
    cuda_ok(cudaMemcpy(pull_[peer], image.data(), image.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  }

  /// The same from the side stream, while the kernel runs (through pinned memory allocated beforehand).
  void fill_peer_cell_late(int peer, const std::vector<std::uint8_t>& data, std::uint32_t flag) {
    const std::vector<std::uint8_t> image = flagged_lines(data, flag);
    std::memcpy(late_lines_, image.data(), image.size());
    cuda_ok(cudaMemcpyAsync(pull_[peer], late_lines_, image.size(), cudaMemcpyHostToDevice, side_), "cudaMemcpyAsync");
    cuda_ok(cudaStreamSynchronize(side_), "cudaStreamSynchronize");
  }

  /// Host word i's device address: words 0 and 2 are peer 0's and peer 2's filled host words (release), 1 the raise.
  /// Device words: 0 the announcement, 1 and 2 the CTA counts (read their inputs; pushed their lines).
  std::uint32_t* host_word_on_device(int i) const { return host_words_on_device_ + i; }
  void release(int peer) { __atomic_store_n(&host_words_[peer], kFilled - 1 + (1u << 30), __ATOMIC_RELEASE); }

  /// Rank 1's call on `send` into `recv` (count elements of type, op) on `ctas` CTAs, pushing `push_lines` lines.
  void launch(DataType type, ReduceOp op, const void* send, void* recv, std::size_t count, int ctas = 1,
              std::size_t push_lines = 0) {
    test::wait_for_legacy_stream();  // the fixture's setup, before the kernel on its non-blocking stream
    LlAllreduce call{.type = type,
                     .op = op,
                     .nranks = kRanks,
                     .rank = kRank,
                     .send = send,
                     .recv = recv,
                     .count = count,
                     .flag = kFlag,
                     .filled_count = kFilled,
                     .ctas = ctas,
                     .push_lines = push_lines != 0 ? push_lines : ll_lines(count * datatype_size(type))};
    for (int r : {0, 2}) {
      call.push_to[r] = push_[r];
      call.pull_from[r] = pull_[r];
      call.release[r] = host_word_on_device(r);
    }
    ReduceGate gate;
    gate.announces = 1;
    gate.announce_word[0] = device_words_ + 0;
    gate.announce_value = kFilled;
    gate.raises = 1;
    gate.raise_word[0] = host_word_on_device(1);
    gate.raise_value[0] = kFilled;
    gate.ctas_done = device_words_ + 1;
    gate.ctas_published = device_words_ + 2;
    launch_ll_allreduce_cuda(call, stream_, 0, gate);
  }

  bool finished_within(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return true;
      if (status != cudaErrorNotReady) cuda_ok(status, "cudaStreamQuery");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  std::vector<std::uint8_t> download(const void* from, std::size_t bytes) {
    std::vector<std::uint8_t> data(bytes);
    cuda_ok(cudaMemcpy(data.data(), from, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return data;
  }

  std::uint32_t device_word(int i) {
    std::uint32_t value = 0;
    cuda_ok(cudaMemcpy(&value, device_words_ + i, sizeof value, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return value;
  }

  cudaStream_t stream_ = nullptr;
  cudaStream_t side_ = nullptr;
  std::uint8_t* buffer_ = nullptr;  // this rank's input (and, in place, its output)
  std::uint8_t* out_ = nullptr;
  std::uint8_t* pull_[kRanks] = {};  // the peers' cells here
  std::uint8_t* push_[kRanks] = {};  // this rank's cells at the (played) peers
  std::uint32_t* device_words_ = nullptr;
  std::uint32_t* host_words_ = nullptr;
  std::uint32_t* host_words_on_device_ = nullptr;
  std::uint8_t* late_lines_ = nullptr;
};

TEST_F(LlAllreduceKernel, ReducesThePeersLinesInRankOrderAndPushesItsOwn) {
  struct Case {
    DataType type;
    ReduceOp op;
    std::size_t count;
  };
  // Partial last lines (4012, 8194, 6, 80004 and kLlMaxBytes - 3 bytes), the largest call, every type; on one CTA,
  // on more CTAs than the data has shares (ll_ctas_for) and on as many as a gated kernel takes.
  const Case cases[] = {{DataType::F32, ReduceOp::Sum, 1003},
                        {DataType::BF16, ReduceOp::Sum, 4097},
                        {DataType::F16, ReduceOp::Max, 3},
                        {DataType::U8, ReduceOp::Min, kLlMaxBytes - 3},
                        {DataType::I64, ReduceOp::Prod, 100},
                        {DataType::F64, ReduceOp::Avg, 4096},
                        {DataType::I32, ReduceOp::Sum, 8192},
                        {DataType::F32, ReduceOp::Max, 20001},
                        {DataType::BF16, ReduceOp::Sum, kLlMaxBytes / 2}};
  const std::uint64_t driver_launches = device::cuda::kernel_launches_through_driver();
  for (const int ctas : {1, 3, kMaxGatedCtas})
    for (const Case& one : cases) {
      SCOPED_TRACE(std::string(datatype_name(one.type)) + " " + reduce_op_name(one.op) + " x " +
                   std::to_string(one.count) + " on " + std::to_string(ctas) + " CTAs");
      clear();
      const std::size_t bytes = one.count * datatype_size(one.type);
      std::vector<std::uint8_t> inputs[kRanks];
      for (int r = 0; r < kRanks; ++r) inputs[r] = input_bytes(one.type, one.count, r + 1);
      fill_peer_cell(0, inputs[0], kFlag);
      fill_peer_cell(2, inputs[2], kFlag);
      cuda_ok(cudaMemcpy(buffer_, inputs[kRank].data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      launch(one.type, one.op, buffer_, out_, one.count, ctas);
      ASSERT_TRUE(finished_within(10)) << "the kernel did not finish with every line there";
      std::vector<std::uint8_t> expected(bytes);
      const void* in[kRanks] = {inputs[0].data(), inputs[1].data(), inputs[2].data()};
      reduce_host(one.type, one.op, kRanks, expected.data(), in, kRanks, one.count);
      EXPECT_EQ(download(out_, bytes), expected) << "not the host reduction's bits";
      const std::vector<std::uint8_t> lines = flagged_lines(inputs[kRank], kFlag);
      for (int r : {0, 2}) EXPECT_EQ(download(push_[r], lines.size()), lines) << "lines pushed to rank " << r;
      EXPECT_EQ(device_word(0), kFilled) << "announced";
      EXPECT_EQ(__atomic_load_n(&host_words_[1], __ATOMIC_ACQUIRE), kFilled) << "raised";
      EXPECT_EQ(device_word(1), 0u) << "the CTA count of inputs read, left at 0";
      EXPECT_EQ(device_word(2), 0u) << "the CTA count of lines pushed, left at 0";
    }
  // Every launch went through the driver (cuLaunchKernel), every argument as the kernel takes it.
  EXPECT_EQ(device::cuda::kernel_launches_through_driver(), driver_launches + 3 * std::size(cases));
}

TEST_F(LlAllreduceKernel, InPlaceAtAnUnalignedAddressReadsEveryByteBeforeItWritesIt) {
  for (const int ctas : {1, 4})
    for (std::size_t offset : {1, 2, 6}) {
      SCOPED_TRACE(std::to_string(offset) + " bytes off, on " + std::to_string(ctas) + " CTAs");
      clear();
      const std::size_t count = 40001;  // bf16, 80002 bytes: lines of every CTA
      const std::size_t bytes = count * 2;
      std::vector<std::uint8_t> inputs[kRanks];
      for (int r = 0; r < kRanks; ++r) inputs[r] = input_bytes(DataType::BF16, count, r + 5);
      fill_peer_cell(0, inputs[0], kFlag);
      fill_peer_cell(2, inputs[2], kFlag);
      std::uint8_t* at = buffer_ + offset;
      cuda_ok(cudaMemcpy(at, inputs[kRank].data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      launch(DataType::BF16, ReduceOp::Sum, at, at, count, ctas);
      ASSERT_TRUE(finished_within(10));
      std::vector<std::uint8_t> expected(bytes);
      const void* in[kRanks] = {inputs[0].data(), inputs[1].data(), inputs[2].data()};
      reduce_host(DataType::BF16, ReduceOp::Sum, kRanks, expected.data(), in, kRanks, count);
      EXPECT_EQ(download(at, bytes), expected);
      const std::vector<std::uint8_t> lines = flagged_lines(inputs[kRank], kFlag);
      EXPECT_EQ(download(push_[0], lines.size()), lines) << "the input pushed, not the result";
    }
}

TEST_F(LlAllreduceKernel, WaitsForLinesThatStillCarryAnOlderFlag) {
  for (const int ctas : {1, 5}) {
    SCOPED_TRACE(std::to_string(ctas) + " CTAs");
    clear();
    const std::size_t count = 20000;  // floats: lines of every CTA
    std::vector<std::uint8_t> inputs[kRanks];
    for (int r = 0; r < kRanks; ++r) inputs[r] = input_bytes(DataType::F32, count, r + 9);
    fill_peer_cell(0, inputs[0], kFlag);
    fill_peer_cell(2, input_bytes(DataType::F32, count, 30), kOlderFlag);
    cuda_ok(cudaMemcpy(buffer_, inputs[kRank].data(), count * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    launch(DataType::F32, ReduceOp::Sum, buffer_, out_, count, ctas);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "lines of an older call were taken";
    EXPECT_EQ(device_word(0), kFilled) << "announced once every CTA pushed its lines, before the polls end";
    // The peer's ordinary count in its host word does not end the polls (it is no release).
    __atomic_store_n(&host_words_[2], kFilled, __ATOMIC_RELEASE);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "the peer's filled count ended the polls";
    fill_peer_cell_late(2, inputs[2], kFlag);
    ASSERT_TRUE(finished_within(10)) << "the kernel did not see the lines arrive";
    std::vector<std::uint8_t> expected(count * 4);
    const void* in[kRanks] = {inputs[0].data(), inputs[1].data(), inputs[2].data()};
    reduce_host(DataType::F32, ReduceOp::Sum, kRanks, expected.data(), in, kRanks, count);
    EXPECT_EQ(download(out_, count * 4), expected);
  }
}

TEST_F(LlAllreduceKernel, AReleasedPairEndsThePollsForItsLines) {
  for (const int ctas : {1, 4}) {
    SCOPED_TRACE(std::to_string(ctas) + " CTAs: each CTA's watcher sees the release");
    clear();
    const std::vector<std::uint8_t> data = input_bytes(DataType::F32, 16384, 1);
    fill_peer_cell(0, data, kFlag);  // peer 2's lines never come
    cuda_ok(cudaMemcpy(buffer_, data.data(), data.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    launch(DataType::F32, ReduceOp::Sum, buffer_, out_, 16384, ctas);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "finished without peer 2's lines";
    release(2);
    ASSERT_TRUE(finished_within(10)) << "a released pair did not end the polls";
    EXPECT_EQ(__atomic_load_n(&host_words_[1], __ATOMIC_ACQUIRE), kFilled) << "the emptied raise, at the end";
  }
}

TEST_F(LlAllreduceKernel, ARefreshWritesEveryLineOfTheCell) {
  const std::vector<std::uint8_t> data = input_bytes(DataType::F32, 3, 4);  // 12 bytes: 2 lines of data
  fill_peer_cell(0, data, kFlag);
  fill_peer_cell(2, data, kFlag);
  cuda_ok(cudaMemcpy(buffer_, data.data(), data.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  const std::size_t all_lines = ll_lines(kLlMaxBytes);
  launch(DataType::F32, ReduceOp::Sum, buffer_, out_, 3, 3, all_lines);  // on 3 CTAs: their lines of zeros too
  ASSERT_TRUE(finished_within(10));
  std::vector<std::uint8_t> padded(kLlMaxBytes, 0);
  std::memcpy(padded.data(), data.data(), data.size());
  EXPECT_EQ(download(push_[2], kCellBytes), flagged_lines(padded, kFlag)) << "every line flagged, zeros after the data";
}

}  // namespace
}  // namespace pickle::coll
