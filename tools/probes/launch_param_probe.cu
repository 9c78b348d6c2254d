// launch_param_probe: what a kernel's parameter bytes cost a launch, on the host and on the GPU. pickle's gated
// kernels take their whole call as parameters (the LL form about 2 KB: LlAllreduce and ReduceGate; the loads form
// about 2.5 KB with its 128 input pointers), and host_sampler found cudaLaunchKernel at 34-42% of a small
// allreduce's host time, about 4-5 us per call (docs/results/2026-11-30e-h200x2.md), where a bare launch is
// commonly 2-3 us. Are the parameter bytes the difference?
//
// A trivial kernel (one thread reads one word of its parameters and adds it to a counter) with parameter structs of
// several sizes, on GPU 0, one host thread:
//   host   the host's time per cudaLaunchKernel: `launches` launches in batches of 256 (synchronized between batches,
//          untimed, so that the launch queue never fills and blocks), the median over `repeats`
//   gpu    the GPU's time per launch: 256 back to back between two events, behind a kernel that holds the stream
//          until all are queued (the GPU's own pace, not the host's; few enough that the launch queue takes them all)
// Each size twice: through the runtime (cudaLaunchKernel, as pickle's kernels are launched) and through the driver
// (cuLaunchKernel on the CUfunction that cudaGetFuncBySymbol found once, as NCCL launches): what does the runtime's
// own work per launch cost?
// Then, host time only (2 KB through the runtime): a launch of 8 CTAs of 1024 threads, a launch followed by an event
// record, and the record alone: does pickle's launch cost more than the bare one for its grid or for the event records
// around it?
// The counter must end at the sum of what every launch of the first part added (a launch that did not run fails the
// probe).
// Not part of pickle: a measurement tool (docs/results).
//
// Usage: launch_param_probe [launches=4096] [repeats=7]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.hpp"

namespace {

using probe::check;

template <int Bytes>
struct Params {
  unsigned long long word[Bytes / 8];
};

template <int Bytes>
__global__ void __launch_bounds__(1024) add_kernel(Params<Bytes> params, unsigned long long* counter) {
  // Reads the last word, so the parameters cannot be trimmed.
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(counter, params.word[Bytes / 8 - 1]);
}

__global__ void hold_kernel(volatile int* gate) {
  while (*gate == 0) {
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void**, void**);

/// One launch of add_kernel<Bytes>: through the runtime, or through the driver when `function` is set.
template <int Bytes>
void launch(Params<Bytes>& params, unsigned long long*& counter, cudaStream_t stream, LaunchKernel driver_launch,
            CUfunction function) {
  if (function == nullptr) {
    add_kernel<Bytes><<<1, 32, 0, stream>>>(params, counter);
    return;
  }
  void* args[] = {&params, &counter};
  check(driver_launch(function, 1, 1, 1, 32, 1, 1, 0, reinterpret_cast<CUstream>(stream), args, nullptr),
        "cuLaunchKernel");
}

template <int Bytes>
void measure(int launches, int repeats, unsigned long long* counter, int* gate_host, int* gate_device,
             cudaStream_t stream, LaunchKernel driver_launch, bool through_driver) {
  Params<Bytes> params{};
  params.word[Bytes / 8 - 1] = 1;
  CUfunction function = nullptr;
  if (through_driver) {
    check(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&function),
                              reinterpret_cast<const void*>(&add_kernel<Bytes>)),
          "cudaGetFuncBySymbol");
  }
  check(cudaMemsetAsync(counter, 0, sizeof(*counter), stream), "memset");
  unsigned long long expected = 0;
  std::vector<double> host_us, gpu_us;
  constexpr int kBatch = 256;
  for (int r = 0; r < repeats; ++r) {
    double seconds = 0;
    for (int done = 0; done < launches; done += kBatch) {
      check(cudaStreamSynchronize(stream), "synchronize");
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; ++i) launch<Bytes>(params, counter, stream, driver_launch, function);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      expected += kBatch;
    }
    check(cudaGetLastError(), "launch");
    host_us.push_back(seconds * 1e6 / ((launches + kBatch - 1) / kBatch * kBatch));

    cudaEvent_t begin, end;
    check(cudaEventCreate(&begin), "event");
    check(cudaEventCreate(&end), "event");
    *gate_host = 0;
    hold_kernel<<<1, 1, 0, stream>>>(gate_device);
    check(cudaEventRecord(begin, stream), "record");
    for (int i = 0; i < kBatch; ++i) launch<Bytes>(params, counter, stream, driver_launch, function);
    check(cudaEventRecord(end, stream), "record");
    expected += kBatch;
    *reinterpret_cast<volatile int*>(gate_host) = 1;
    check(cudaEventSynchronize(end), "synchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin, end), "elapsed");
    gpu_us.push_back(ms * 1e3 / kBatch);
    check(cudaEventDestroy(begin), "event");
    check(cudaEventDestroy(end), "event");
  }
  unsigned long long got = 0;
  check(cudaMemcpy(&got, counter, sizeof(got), cudaMemcpyDeviceToHost), "copy");
  if (got != expected) {
    std::fprintf(stderr, "params %d B: the counter is %llu, expected %llu\n", Bytes, got, expected);
    std::exit(1);
  }
  std::printf("%8s %8d %14.2f %14.2f %14.2f %14.2f\n", through_driver ? "driver" : "runtime", Bytes, median(host_us),
              *std::min_element(host_us.begin(), host_us.end()), median(gpu_us),
              *std::min_element(gpu_us.begin(), gpu_us.end()));
}

/// Host time per step of other shapes, 2 KB of parameters through the runtime (as pickle's LL kernel): `wide` is a
/// launch of 8 CTAs of 1024 threads (the LL kernel's largest default grid) instead of 1 x 32; `record` a launch
/// followed by an event record (pickle's calls record one or two events each); `record_only` the record alone.
void measure_shapes(int launches, int repeats, unsigned long long* counter, cudaStream_t stream) {
  Params<2048> params{};
  params.word[2048 / 8 - 1] = 1;
  cudaEvent_t event;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "event");
  constexpr int kBatch = 256;
  for (const char* shape : {"wide", "record", "record_only", "wide", "record", "record_only"}) {
    const std::string name = shape;
    std::vector<double> host_us;
    for (int r = 0; r < repeats; ++r) {
      double seconds = 0;
      for (int done = 0; done < launches; done += kBatch) {
        check(cudaStreamSynchronize(stream), "synchronize");
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kBatch; ++i) {
          if (name == "wide") {
            add_kernel<2048><<<8, 1024, 0, stream>>>(params, counter);
          } else if (name == "record") {
            add_kernel<2048><<<1, 32, 0, stream>>>(params, counter);
            check(cudaEventRecord(event, stream), "record");
          } else {
            check(cudaEventRecord(event, stream), "record");
          }
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      check(cudaGetLastError(), "launch");
      host_us.push_back(seconds * 1e6 / ((launches + kBatch - 1) / kBatch * kBatch));
    }
    std::printf("%12s %8d %14.2f %14.2f\n", shape, 2048, median(host_us),
                *std::min_element(host_us.begin(), host_us.end()));
  }
  check(cudaStreamSynchronize(stream), "synchronize");
  check(cudaEventDestroy(event), "event");
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = std::max(256, argc > 1 ? std::atoi(argv[1]) : 4096);
  const int repeats = std::max(1, argc > 2 ? std::atoi(argv[2]) : 7);
  check(cudaSetDevice(0), "set device");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  unsigned long long* counter = nullptr;
  check(cudaMalloc(&counter, sizeof(*counter)), "malloc");
  int* gate_host = nullptr;
  check(cudaHostAlloc(&gate_host, sizeof(int), cudaHostAllocMapped), "host alloc");
  int* gate_device = nullptr;
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate_device), gate_host, 0), "device pointer");
  std::printf("# launch_param_probe: %d launches x %d repeats, one host thread, GPU 0\n", launches, repeats);
  LaunchKernel driver_launch = nullptr;
  cudaDriverEntryPointQueryResult found;
  check(cudaGetDriverEntryPointByVersion("cuLaunchKernel", reinterpret_cast<void**>(&driver_launch), 12000,
                                         cudaEnableDefault, &found),
        "cuLaunchKernel entry point");
  std::printf("%8s %8s %14s %14s %14s %14s\n", "launch", "params_B", "host_us_med", "host_us_min", "gpu_us_med",
              "gpu_us_min");
  for (bool driver : {false, true}) {
    measure<16>(launches, repeats, counter, gate_host, gate_device, stream, driver_launch, driver);
    measure<256>(launches, repeats, counter, gate_host, gate_device, stream, driver_launch, driver);
    measure<1024>(launches, repeats, counter, gate_host, gate_device, stream, driver_launch, driver);
    measure<2048>(launches, repeats, counter, gate_host, gate_device, stream, driver_launch, driver);
    measure<4000>(launches, repeats, counter, gate_host, gate_device, stream, driver_launch, driver);
  }
  // Again, alternating: the first may pay warm-up, and the host's pace drifts.
  for (bool driver : {false, true, false, true}) {
    measure<2048>(launches, repeats, counter, gate_host, gate_device, stream, driver_launch, driver);
  }
  std::printf("%12s %8s %14s %14s\n", "shape", "params_B", "host_us_med", "host_us_min");
  measure_shapes(launches, repeats, counter, stream);
  return 0;
}
