// reduce_probe: the throughput of the collectives' reduction kernel (src/collectives/reduce_cuda.cu, launched by
// libpickle) on one GPU, with a bounded number of CTAs: the kernel that sets the pace of large allreduces when the
// copy engines move the data (docs/collectives.md: at 8 CTAs the reduction, not the copies, was the limit on
// 2 x H200). It needs no second GPU: the kernel reads and writes local memory only.
//
// For each CTA budget, type and output size: `n` launches back to back on one stream, timed with events, median of
// the repeats. GB/s of output and of memory traffic ((inputs + 1) x output bytes). The output of the last launch is
// checked against the sum computed on the host (inputs are small integers: every sum is exact).
//
// Usage: reduce_probe [launches=20] [repeats=7] [inputs=2] [ctas=8,16,32] [bytes...=4M 16M 64M 256M]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/reduce.hpp"
#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;

/// Input j holds (i % 7) + j at element i (exact in f32 and bf16), so the sum of `inputs` inputs at i is
/// inputs * (i % 7) + inputs * (inputs - 1) / 2.
float expected(std::size_t i, int inputs) {
  return static_cast<float>(inputs * static_cast<int>(i % 7) + inputs * (inputs - 1) / 2);
}

/// Elements of `out` (count elements of `type`) that are not the expected sum.
std::size_t count_wrong(const void* out, pickle::DataType type, std::size_t count, int inputs) {
  std::size_t wrong = 0;
  if (type == pickle::DataType::F32) {
    std::vector<float> host(count);
    check(cudaMemcpy(host.data(), out, count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (std::size_t i = 0; i < count; ++i) wrong += host[i] != expected(i, inputs);
  } else {
    std::vector<__nv_bfloat16> host(count);
    check(cudaMemcpy(host.data(), out, count * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (std::size_t i = 0; i < count; ++i) wrong += __bfloat162float(host[i]) != expected(i, inputs);
  }
  return wrong;
}

void fill_input(void* device_ptr, pickle::DataType type, std::size_t count, int j) {
  if (type == pickle::DataType::F32) {
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(static_cast<int>(i % 7) + j);
    check(cudaMemcpy(device_ptr, host.data(), count * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  } else {
    std::vector<__nv_bfloat16> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = __float2bfloat16(static_cast<float>(static_cast<int>(i % 7) + j));
    check(cudaMemcpy(device_ptr, host.data(), count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 20;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  const int inputs = argc > 3 ? std::atoi(argv[3]) : 2;
  const std::vector<int> budgets = probe::parse_ints(argc > 4 ? argv[4] : "8,16,32");
  std::vector<std::size_t> sizes;
  for (int i = 5; i < argc; ++i) sizes.push_back(probe::parse_bytes(argv[i]));
  if (sizes.empty()) sizes = {4u << 20, 16u << 20, 64u << 20, 256u << 20};
  if (inputs < 1 || inputs > pickle::coll::kMaxReduceInputs) {
    std::fprintf(stderr, "reduce_probe: inputs must be 1 to %d\n", pickle::coll::kMaxReduceInputs);
    return 2;
  }
  const std::size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# reduce_probe on %s (%d SMs): %d inputs, %d launches per repeat, median of %d\n", prop.name,
              prop.multiProcessorCount, inputs, launches, repeats);
  std::vector<void*> in(static_cast<std::size_t>(inputs));
  for (auto& p : in) check(cudaMalloc(&p, max_bytes), "cudaMalloc");
  void* out = nullptr;
  check(cudaMalloc(&out, max_bytes), "cudaMalloc");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  pickle::coll::load_reduce_kernels(0);
  int failures = 0;
  for (pickle::DataType type : {pickle::DataType::F32, pickle::DataType::BF16}) {
    const std::size_t element = type == pickle::DataType::F32 ? 4 : 2;
    for (int j = 0; j < inputs; ++j) fill_input(in[static_cast<std::size_t>(j)], type, max_bytes / element, j);
    for (int ctas : budgets) {
      for (std::size_t bytes : sizes) {
        pickle::coll::ReduceTask task;
        task.type = type;
        task.op = pickle::ReduceOp::Sum;
        task.nranks = inputs;
        task.out = out;
        task.count = bytes / element;
        task.ninputs = inputs;
        std::copy(in.begin(), in.end(), task.inputs);
        check(cudaMemset(out, 0, bytes), "cudaMemset");
        std::vector<double> us;
        for (int r = 0; r < repeats + 1; ++r) {  // the first is a warm-up
          check(cudaEventRecord(start, stream), "cudaEventRecord");
          for (int l = 0; l < launches; ++l) pickle::coll::launch_reduce_cuda(task, stream, 0, ctas);
          check(cudaEventRecord(stop, stream), "cudaEventRecord");
          check(cudaEventSynchronize(stop), "cudaEventSynchronize");
          float ms = 0;
          check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
          if (r > 0) us.push_back(ms * 1e3 / launches);
        }
        std::sort(us.begin(), us.end());
        const double median = us[us.size() / 2];
        const std::size_t wrong = count_wrong(out, type, task.count, inputs);
        failures += wrong != 0;
        std::printf("%-4s ctas %3d %11zu B  %8.1f us  out %7.1f GB/s  traffic %7.1f GB/s  #wrong %zu\n",
                    pickle::datatype_name(type), ctas, bytes, median, bytes / (median * 1e3),
                    bytes * (inputs + 1.0) / (median * 1e3), wrong);
        std::fflush(stdout);
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
