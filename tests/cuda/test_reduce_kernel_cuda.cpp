// The collectives' reduction kernel (src/collectives/reduce_cuda.cu) on one GPU against the host's reduction
// (reduce_host.cpp), which has the same element semantics (widen, combine in input order, finish, narrow): every type
// and operator; one and two inputs (the path that combines as soon as both are loaded) and three and five (the
// accumulating path); counts of one element, of whole vectors and a tail, and of several passes of every CTA;
// unaligned inputs (the scalar path); out of place and in place over input 0 or input 1 (as rank 1 of a two-rank
// allreduce reduces into its own input, the second); 1 and 8 CTAs. Results must match bit for bit, and the bytes
// just before and after the output must stay as they were. (One input in place reproduces itself whatever the
// operator, avg over one rank included: those cases check only that nothing around the output is written.)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <pickle/collectives.hpp>

#include "collectives/reduce.hpp"
#include "cuda_test_util.hpp"
#include "device/backends.hpp"

namespace pickle::coll {
namespace {

using test::cuda_ok;

constexpr int kMostInputs = 5;
/// Elements of the largest cases: at least two passes of 8 CTAs of 1024 threads at 4 vectors each for every type (u8:
/// 512 KiB a pass), and not a whole number of vectors.
constexpr std::size_t kLargest = (std::size_t{1} << 20) + 7;
constexpr std::size_t kGuardBytes = 64;  ///< before and after the output: the kernel must not write there
constexpr unsigned char kGuardByte = 0xa5;

constexpr int kOutOfPlace = -1;

struct Case {
  std::size_t count;
  std::size_t offset_elements;  ///< of every input and the output, past the guard before it
  int in_place;                 ///< the input that is also the output (the last one with fewer inputs), or kOutOfPlace
  int ctas;
};

constexpr Case kCases[] = {
    {1, 0, kOutOfPlace, 8},         // one element: no whole vector
    {33, 0, 1, 8},                  // whole vectors and a one-element tail (every type); in place over input 1
    {kLargest, 0, kOutOfPlace, 8},  // passes of every CTA, a tail
    {kLargest, 0, 0, 1},            // one CTA, in place over input 0
    {kLargest, 1, kOutOfPlace, 8},  // one element off the vectors' alignment: the scalar path
    {kLargest, 1, 1, 8},            // the same in place over input 1
};

/// `count` random elements of `type` as bytes. Floating-point values are 0.25 to 4 in magnitude, either sign, so that
/// sums and products of five stay normal and finite in every floating type (no NaN, whose payload the two sides
/// could round differently); integers take any bits (their sums and products wrap alike on both sides).
std::vector<unsigned char> random_elements(DataType type, std::size_t count, std::mt19937_64& rng) {
  std::vector<unsigned char> bytes(count * datatype_size(type));
  std::uniform_real_distribution<double> magnitude(0.25, 4.0);
  auto value = [&] { return (rng() & 1) ? magnitude(rng) : -magnitude(rng); };
  for (std::size_t i = 0; i < count; ++i) {
    unsigned char* at = bytes.data() + i * datatype_size(type);
    switch (type) {
      case DataType::F32: {
        const float v = static_cast<float>(value());
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::F64: {
        const double v = value();
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::F16: {
        const std::uint16_t v = Element<F16Tag>::store(static_cast<float>(value()));
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::BF16: {
        const std::uint16_t v = Element<BF16Tag>::store(static_cast<float>(value()));
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::I32:
      case DataType::I64:
      case DataType::U8: {
        const std::uint64_t v = rng();
        std::memcpy(at, &v, datatype_size(type));
        break;
      }
    }
  }
  return bytes;
}

class ReduceKernel : public testing::Test {
 protected:
  void SetUp() override {
    if (device::cuda_device_count() == 0) GTEST_SKIP() << "needs a GPU: " << device::cuda_unavailable_reason();
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    load_reduce_kernels(0);
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    for (auto*& buffer : inputs_) cuda_ok(cudaMalloc(&buffer, kAllocationBytes), "cudaMalloc");
    cuda_ok(cudaMalloc(&out_, kAllocationBytes), "cudaMalloc");
  }

  void TearDown() override {
    if (stream_ == nullptr) return;
    for (void* buffer : inputs_) cudaFree(buffer);
    cudaFree(out_);
    cudaStreamDestroy(stream_);
  }

  /// Reduces `ninputs` of `host_inputs` (each kLargest elements of `type`) on the GPU as `c` says and compares the
  /// result, and the guard bytes around it, with the host's reduction. Empty when they match, else what differs.
  std::string run_case(DataType type, ReduceOp op, int ninputs, const Case& c,
                       const std::vector<std::vector<unsigned char>>& host_inputs) {
    const std::size_t element = datatype_size(type);
    const std::size_t bytes = c.count * element;
    // The output starts kGuardBytes (and the case's offset) into its allocation, so that a guard lies before it.
    const std::size_t start = kGuardBytes + c.offset_elements * element;
    char* const out = static_cast<char*>(c.in_place == kOutOfPlace ? out_ : inputs_[std::min(c.in_place, ninputs - 1)]);
    // Everything on the kernel's stream: a non-blocking stream does not wait for the legacy stream's cudaMemset,
    // nor for the last part of a cudaMemcpy from pageable memory, which may return before its data has landed.
    for (int j = 0; j < ninputs; ++j) {  // again for every case: an in-place case overwrote one
      cuda_ok(cudaMemcpyAsync(static_cast<char*>(inputs_[j]) + start, host_inputs[j].data(), bytes,
                              cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync");
    }
    if (out == out_) cuda_ok(cudaMemsetAsync(out + start, 0x5a, bytes, stream_), "cudaMemsetAsync");
    cuda_ok(cudaMemsetAsync(out + start - kGuardBytes, kGuardByte, kGuardBytes, stream_), "cudaMemsetAsync");
    cuda_ok(cudaMemsetAsync(out + start + bytes, kGuardByte, kGuardBytes, stream_), "cudaMemsetAsync");

    ReduceTask task;
    task.type = type;
    task.op = op;
    task.nranks = ninputs;
    task.out = out + start;
    task.count = c.count;
    task.ninputs = ninputs;
    for (int j = 0; j < ninputs; ++j) task.inputs[j] = static_cast<const char*>(inputs_[j]) + start;
    launch_reduce_cuda(task, stream_, 0, c.ctas);
    std::vector<unsigned char> got(kGuardBytes + bytes + kGuardBytes);
    cuda_ok(cudaMemcpyAsync(got.data(), out + start - kGuardBytes, got.size(), cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync");
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    std::vector<unsigned char> want(bytes);
    std::vector<const void*> pointers;
    for (int j = 0; j < ninputs; ++j) pointers.push_back(host_inputs[j].data());
    reduce_host(type, op, ninputs, want.data(), pointers.data(), ninputs, c.count);

    const unsigned char* result = got.data() + kGuardBytes;
    for (std::size_t i = 0; i < c.count; ++i) {
      if (std::memcmp(result + i * element, want.data() + i * element, element) != 0) {
        return "element " + std::to_string(i) + " of " + std::to_string(c.count) + " differs from the host's";
      }
    }
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      if (got[i] != kGuardByte) return "byte " + std::to_string(kGuardBytes - i) + " before the output was written";
      if (result[bytes + i] != kGuardByte) return "byte " + std::to_string(i) + " after the output was written";
    }
    return {};
  }

  static constexpr std::size_t kAllocationBytes = kGuardBytes + 8 + kLargest * 8 + kGuardBytes;
  cudaStream_t stream_ = nullptr;
  void* inputs_[kMostInputs] = {};
  void* out_ = nullptr;
};

TEST_F(ReduceKernel, EveryTypeOperatorAndInputCountMatchesTheHostBitForBit) {
  std::mt19937_64 rng(20261201);
  int cases = 0;
  for (DataType type : kReduceTypes) {
    std::vector<std::vector<unsigned char>> host_inputs;
    for (int j = 0; j < kMostInputs; ++j) host_inputs.push_back(random_elements(type, kLargest, rng));
    for (ReduceOp op : kReduceOps) {
      for (int ninputs : {1, 2, 3, kMostInputs}) {
        for (const Case& c : kCases) {
          const std::string differs = run_case(type, op, ninputs, c, host_inputs);
          const std::string where = c.in_place == kOutOfPlace
                                        ? "out of place"
                                        : "in place over input " + std::to_string(std::min(c.in_place, ninputs - 1));
          EXPECT_EQ(differs, "") << datatype_name(type) << " " << reduce_op_name(op) << ", " << ninputs << " inputs, "
                                 << c.count << " elements at element offset " << c.offset_elements << ", " << where
                                 << ", " << c.ctas << " CTAs";
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 7 * 5 * 4 * static_cast<int>(std::size(kCases)));
}

}  // namespace
}  // namespace pickle::coll
