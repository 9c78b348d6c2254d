// mailbox_push_probe: where the time of a one-shot two-rank allreduce goes, step by step, in the mailboxes' loads
// form against a push form. On two H200s joined by NVLink a 4 MB bf16 allreduce takes about 48 us in the loads form
// and about 34 us in NCCL. The loads form's kernel (at most 8 CTAs of 1024 threads) (1) copies the rank's input into
// its own cell, then (2) reduces its input (local) with the peer's cell, read over NVLink: every load a round trip.
// A push form would (3) store its input straight into the peer's inbox over NVLink (remote stores: no round trip),
// then (4) reduce from local memory only (input + inbox). This probe times each step alone and the two pairs, per
// CTA budget, to tell whether a push form is worth building and whether the number of CTAs is the limit.
//
// On GPUs 0 and 1 (peer access both ways), each with input, cell, inbox and out (bf16, on that GPU), phases:
//   copy_local     input[g] -> cell[g], a probe kernel (16-byte vectors, grid-stride, C CTAs x 1024 threads: the
//                  loop of the library's publication, src/collectives/reduce_cuda.cu)                        step (1)
//   pull_reduce    the library's reduction kernel (from libpickle), {input[g], cell[peer]} -> out[g], C CTAs     step (2)
//   push           input[g] -> inbox[peer], the copy_local kernel with a remote destination                  step (3)
//   local_reduce   the library's reduction kernel, {input[g], inbox[g]} -> out[g] (both local)               step (4)
//   pull_total     copy_local then pull_reduce, one after the other on one stream (two kernels per launch)
//   push_total     push then local_reduce, likewise
//   ce_peer_copy   cudaMemcpyPeerAsync input[g] -> inbox[peer] (the copy engine, for reference: ctas 0, once per size)
// Each phase runs `launches` times back to back on each GPU's stream, both GPUs at once (the streams wait at a gate,
// a host word, until all is queued); time per launch = the slower GPU's event time / launches; median, min and max
// of `repeats` (after a warm-up). GB/s = bytes / time (1e9 B/s). There is no synchronization between the GPUs: this
// measures the throughput of each step, not a correct allreduce protocol (in pull_total a GPU may read the peer's
// cell while the peer rewrites it). Every launch writes the same values, so the data still comes out exact: inputs
// are small integers ((i % 7) + g at element i of GPU g), every sum is exact in bf16. Each phase's destination is
// filled with NaN before it runs and checked after it (copies against the input, reductions against the sum of both
// inputs); `wrong` counts the elements that differ on both GPUs, and any fails the probe (exit 1). Fewer than two
// GPUs: nothing to measure (exit 0); no peer access: exit 1. Not part of pickle: a measurement tool (docs/results).
//
// Usage: mailbox_push_probe [launches=20] [repeats=7] [ctas=8,16,32] [bytes...=512K 1M 2M 4M 8M]
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/reduce.hpp"
#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using probe::check;

constexpr int kGpus = 2;
constexpr int kThreads = 1024;  // as the library's reduction kernel
/// Launches are queued behind the gate before any runs: at most 2 x this many kernels per stream, few enough that
/// the launch queue does not fill (the host would block with the gate closed).
constexpr int kMaxLaunches = 500;

enum class Phase { kCopyLocal, kPullReduce, kPush, kLocalReduce, kPullTotal, kPushTotal, kCePeerCopy };

struct PhaseName {
  Phase phase;
  const char* name;
};

/// The phases that depend on the CTA budget, in an order where each reading phase follows the one that fills what it
/// reads (pull_reduce reads the cells copy_local filled, local_reduce the inboxes push filled).
constexpr PhaseName kKernelPhases[] = {
    {Phase::kCopyLocal, "copy_local"},     {Phase::kPullReduce, "pull_reduce"}, {Phase::kPush, "push"},
    {Phase::kLocalReduce, "local_reduce"}, {Phase::kPullTotal, "pull_total"},   {Phase::kPushTotal, "push_total"}};
constexpr PhaseName kCePhase = {Phase::kCePeerCopy, "ce_peer_copy"};

struct Gpu {
  int device = 0;
  void* input = nullptr;
  void* cell = nullptr;   // the loads form's cell: this GPU's input, read by the peer
  void* inbox = nullptr;  // the push form's inbox: the peer's input, stored by the peer
  void* out = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

struct Stats {
  double median = 0, min = 0, max = 0;
};

/// `vectors` 16-byte vectors from `from` to `to` (local or a peer's memory), grid-stride: the loop of the library's
/// publication (streaming loads, plain stores), so that copy_local costs what the loads form's step (1) does.
__global__ void __launch_bounds__(kThreads) copy_vectors(const uint4* from, uint4* to, std::size_t vectors) {
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
#pragma unroll 4
  for (std::size_t i = thread; i < vectors; i += threads) to[i] = __ldcs(from + i);
}

/// Enqueues copy_vectors of `bytes` (a multiple of 16) on at most `ctas` CTAs: no more than there are vectors for
/// (as the reduction kernel takes no more CTAs than its work needs).
void launch_copy(const void* from, void* to, std::size_t bytes, int ctas, cudaStream_t stream) {
  const std::size_t vectors = bytes / sizeof(uint4);
  const std::size_t wanted = (vectors + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(wanted, ctas)));
  copy_vectors<<<grid, kThreads, 0, stream>>>(static_cast<const uint4*>(from), static_cast<uint4*>(to), vectors);
  check(cudaGetLastError(), "copy_vectors launch");
}

/// Enqueues the library's reduction: out = input + other (bf16 sum of `bytes`, at most `ctas` CTAs, no gate).
void launch_sum(const Gpu& gpu, const void* other, std::size_t bytes, int ctas) {
  pickle::coll::ReduceTask task;
  task.type = pickle::DataType::BF16;
  task.op = pickle::ReduceOp::Sum;
  task.nranks = kGpus;
  task.out = gpu.out;
  task.count = bytes / sizeof(__nv_bfloat16);
  task.ninputs = 2;
  task.inputs[0] = gpu.input;
  task.inputs[1] = other;
  pickle::coll::launch_reduce_cuda(task, gpu.stream, gpu.device, ctas, nullptr);
}

/// One launch of `phase` on GPU `g`'s stream (the current device is g).
void enqueue_step(Phase phase, Gpu (&gpus)[kGpus], int g, std::size_t bytes, int ctas) {
  Gpu& gpu = gpus[g];
  Gpu& peer = gpus[1 - g];
  switch (phase) {
    case Phase::kCopyLocal:
      launch_copy(gpu.input, gpu.cell, bytes, ctas, gpu.stream);
      break;
    case Phase::kPullReduce:
      launch_sum(gpu, peer.cell, bytes, ctas);
      break;
    case Phase::kPush:
      launch_copy(gpu.input, peer.inbox, bytes, ctas, gpu.stream);
      break;
    case Phase::kLocalReduce:
      launch_sum(gpu, gpu.inbox, bytes, ctas);
      break;
    case Phase::kPullTotal:
      launch_copy(gpu.input, gpu.cell, bytes, ctas, gpu.stream);
      launch_sum(gpu, peer.cell, bytes, ctas);
      break;
    case Phase::kPushTotal:
      launch_copy(gpu.input, peer.inbox, bytes, ctas, gpu.stream);
      launch_sum(gpu, gpu.inbox, bytes, ctas);
      break;
    case Phase::kCePeerCopy:
      check(cudaMemcpyPeerAsync(peer.inbox, peer.device, gpu.input, gpu.device, bytes, gpu.stream),
            "cudaMemcpyPeerAsync");
      break;
  }
}

/// One batch: both streams wait at the gate, `launches` launches of `phase` are queued on each, the gate opens; the
/// slower GPU's microseconds per launch (the events follow the gate, so queueing is not timed).
double time_batch(Gpu (&gpus)[kGpus], unsigned* gate, probe::StreamValueOp wait_value, Phase phase, std::size_t bytes,
                  int ctas, int launches) {
  __atomic_store_n(gate, 0u, __ATOMIC_RELEASE);
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(wait_value(gpus[g].stream, reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
    check(cudaEventRecord(gpus[g].start, gpus[g].stream), "cudaEventRecord");
    for (int l = 0; l < launches; ++l) enqueue_step(phase, gpus, g, bytes, ctas);
    check(cudaEventRecord(gpus[g].stop, gpus[g].stream), "cudaEventRecord");
  }
  __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
  double slowest_ms = 0;
  for (int g = 0; g < kGpus; ++g) {
    check(cudaEventSynchronize(gpus[g].stop), "cudaEventSynchronize");
    slowest_ms = std::max(slowest_ms, static_cast<double>(probe::elapsed_ms(gpus[g].start, gpus[g].stop)));
  }
  return slowest_ms * 1e3 / launches;
}

/// Median, min and max of `samples` (at least one).
Stats summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), samples.back()};
}

/// Fills the buffer each GPU's launches of `phase` write with 0xff bytes (bf16 NaN, never equal to an expected
/// value; zeros would be: (i % 7) + 0 is 0 at every 7th element), so that the check sees this phase's writes only.
void clear_destination(Phase phase, Gpu (&gpus)[kGpus], std::size_t bytes) {
  for (Gpu& gpu : gpus) {
    check(cudaSetDevice(gpu.device), "cudaSetDevice");
    void* first = nullptr;
    void* second = nullptr;
    switch (phase) {
      case Phase::kCopyLocal:
        first = gpu.cell;
        break;
      case Phase::kPush:
      case Phase::kCePeerCopy:
        first = gpu.inbox;
        break;
      case Phase::kPullReduce:
      case Phase::kLocalReduce:
        first = gpu.out;
        break;
      case Phase::kPullTotal:
        first = gpu.cell;
        second = gpu.out;
        break;
      case Phase::kPushTotal:
        first = gpu.inbox;
        second = gpu.out;
        break;
    }
    for (void* p : {first, second}) {
      if (p != nullptr) check(cudaMemset(p, 0xff, bytes), "cudaMemset");
    }
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
}

/// Input of GPU g at element i: small integers, exact in bf16, and so is the sum of both GPUs' inputs.
float input_value(std::size_t i, int g) { return static_cast<float>(static_cast<int>(i % 7) + g); }

void fill_input(const Gpu& gpu, std::size_t count) {
  std::vector<__nv_bfloat16> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = __float2bfloat16(input_value(i, gpu.device));
  check(cudaSetDevice(gpu.device), "cudaSetDevice");
  check(cudaMemcpy(gpu.input, host.data(), count * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice), "cudaMemcpy");
}

/// Elements of `device_ptr` (bf16, on GPU g) that differ from input_value(i, g0) + input_value(i, g1) (g1 < 0: from
/// input_value(i, g0) alone).
std::size_t count_wrong(const void* device_ptr, std::size_t count, int g0, int g1) {
  std::vector<__nv_bfloat16> host(count);
  check(cudaMemcpy(host.data(), device_ptr, count * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const float expected = input_value(i, g0) + (g1 >= 0 ? input_value(i, g1) : 0.0f);
    wrong += __bfloat162float(host[i]) != expected;
  }
  return wrong;
}

/// The wrong elements on both GPUs of what `phase` wrote last: the reductions' out (the sum of both inputs), the
/// local copy's cells (this GPU's input), the pushes' and peer copies' inboxes (the peer's input).
std::size_t check_phase(Phase phase, const Gpu (&gpus)[kGpus], std::size_t bytes) {
  const std::size_t count = bytes / sizeof(__nv_bfloat16);
  std::size_t wrong = 0;
  for (const Gpu& gpu : gpus) {
    const int g = gpu.device, peer = 1 - g;
    switch (phase) {
      case Phase::kCopyLocal:
        wrong += count_wrong(gpu.cell, count, g, -1);
        break;
      case Phase::kPush:
      case Phase::kCePeerCopy:
        wrong += count_wrong(gpu.inbox, count, peer, -1);
        break;
      case Phase::kPullReduce:
      case Phase::kLocalReduce:
      case Phase::kPullTotal:
      case Phase::kPushTotal:
        wrong += count_wrong(gpu.out, count, g, peer);
        break;
    }
  }
  return wrong;
}

/// Clears the phase's destination, times it (a warm-up, then `repeats` batches), checks its data and prints its row;
/// the number of wrong elements.
std::size_t measure(const PhaseName& phase, Gpu (&gpus)[kGpus], unsigned* gate, probe::StreamValueOp wait_value,
                    std::size_t bytes, int ctas, int launches, int repeats) {
  clear_destination(phase.phase, gpus, bytes);
  std::vector<double> us;
  for (int r = 0; r < repeats + 1; ++r) {  // the first is a warm-up
    const double t = time_batch(gpus, gate, wait_value, phase.phase, bytes, ctas, launches);
    if (r > 0) us.push_back(t);
  }
  const Stats s = summarize(us);
  const std::size_t wrong = check_phase(phase.phase, gpus, bytes);
  std::printf("%10zu %5d %-13s %10.2f us (%8.2f, %8.2f) %8.1f GB/s %6zu\n", bytes, ctas, phase.name, s.median, s.min,
              s.max, static_cast<double>(bytes) / (s.median * 1e3), wrong);
  std::fflush(stdout);
  return wrong;
}

/// Peer access between GPUs 0 and 1 both ways, enabled; false (after saying why on stderr) where there is none.
bool enable_peer_access() {
  for (int g = 0; g < kGpus; ++g) {
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, g, 1 - g), "cudaDeviceCanAccessPeer");
    if (!can) {
      std::fprintf(stderr, "mailbox_push_probe: GPU %d cannot access GPU %d's memory (no peer access)\n", g, 1 - g);
      return false;
    }
  }
  for (int g = 0; g < kGpus; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    const cudaError_t status = cudaDeviceEnablePeerAccess(1 - g, 0);
    if (status != cudaSuccess && status != cudaErrorPeerAccessAlreadyEnabled) check(status, "peer access");
    (void)cudaGetLastError();  // clears cudaErrorPeerAccessAlreadyEnabled
  }
  return true;
}

/// GPU g's buffers (max_bytes each), stream and events; its input filled; every kernel loaded (a kernel loaded at its
/// first launch may synchronize the context, whose stream then waits at the closed gate).
void set_up(Gpu& gpu, int g, std::size_t max_bytes) {
  gpu.device = g;
  check(cudaSetDevice(g), "cudaSetDevice");
  for (void** p : {&gpu.input, &gpu.cell, &gpu.inbox, &gpu.out}) check(cudaMalloc(p, max_bytes), "cudaMalloc");
  check(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&gpu.start), "cudaEventCreate");
  check(cudaEventCreate(&gpu.stop), "cudaEventCreate");
  fill_input(gpu, max_bytes / sizeof(__nv_bfloat16));
  pickle::coll::load_reduce_kernels(g);
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, copy_vectors), "load copy_vectors");
}

void print_header(int launches, int repeats) {
  cudaDeviceProp props[kGpus]{};
  for (int g = 0; g < kGpus; ++g) check(cudaGetDeviceProperties(&props[g], g), "cudaGetDeviceProperties");
  std::printf(
      "# mailbox_push_probe on GPU 0 (%s) and GPU 1 (%s): bf16, %d launches per repeat, median (min, max) "
      "of %d; GB/s = bytes / time (1e9 B/s)\n",
      props[0].name, props[1].name, launches, repeats);
  std::printf("# %8s %5s %-13s %13s %20s %13s %6s\n", "bytes", "ctas", "phase", "us_per_launch", "(min, max)", "GB/s",
              "wrong");
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 20;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 7;
  const std::vector<int> budgets = probe::parse_ints(argc > 3 ? argv[3] : "8,16,32");
  std::vector<std::size_t> sizes;
  for (int i = 4; i < argc; ++i) sizes.push_back(probe::parse_bytes(argv[i]));
  if (sizes.empty()) sizes = {512u << 10, 1u << 20, 2u << 20, 4u << 20, 8u << 20};
  const bool sizes_ok = std::all_of(sizes.begin(), sizes.end(), [](std::size_t b) { return b > 0 && b % 16 == 0; });
  const bool budgets_ok = !budgets.empty() && std::all_of(budgets.begin(), budgets.end(), [](int c) { return c > 0; });
  if (launches < 1 || launches > kMaxLaunches || repeats < 1 || !sizes_ok || !budgets_ok) {
    std::fprintf(stderr,
                 "usage: mailbox_push_probe [launches=20, 1-%d] [repeats=7] [ctas=8,16,32] [bytes...=512K 1M 2M 4M "
                 "8M, multiples of 16]\n",
                 kMaxLaunches);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < kGpus) {
    std::fprintf(stderr, "mailbox_push_probe: waived: needs 2 GPUs (found %d)\n", devices);
    return 0;
  }
  if (!enable_peer_access()) return 1;
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  unsigned* gate = probe::mapped_gate();
  const std::size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  Gpu gpus[kGpus];
  for (int g = 0; g < kGpus; ++g) set_up(gpus[g], g, max_bytes);
  print_header(launches, repeats);
  int failures = 0;
  for (std::size_t bytes : sizes) {
    for (int ctas : budgets) {
      for (const PhaseName& phase : kKernelPhases) {
        failures += measure(phase, gpus, gate, wait_value, bytes, ctas, launches, repeats) != 0;
      }
    }
    failures += measure(kCePhase, gpus, gate, wait_value, bytes, 0, launches, repeats) != 0;
  }
  return failures == 0 ? 0 : 1;
}
