// send_completion_probe: what a completion write costs a copy-engine send, and what hides it. One process, one GPU,
// device-to-device copies of 4 KiB to 4 MiB, 200 messages back to back per repeat, median of 7 repeats of the time
// per message (CUDA events; every stream held at a gate until all work is enqueued, so enqueueing is not timed).
//
//   copy only                    cudaMemcpyAsync on one stream: the copy engine's own rate
//   copy+write host              each copy followed by cuStreamWriteValue32 into pinned host memory (default flags:
//                                with a memory barrier), as pickle's ipc transport completes a message
//   copy+write dev               the same word in device memory
//   rotN copy+write host         messages take turns over N streams (PICKLE_IPC_STREAMS=N)
//   copy;event->side write(2)    the copy on one stream, its write on one of 2 side streams after an event
//
// Then a ping-pong between two streams of the process (one hop = wait for the flag, copy, write the other flag), with
// the flags in pinned host memory (where pickle's completion words live) or in device memory (where a peer-mapped
// word would live), and with no copy at all: what a hop's signalling costs beside the copy.
//
// Not part of pickle's library or tests: a measurement tool for the ipc transport's design (docs/results). Usage:
// send_completion_probe [device]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.hpp"

namespace {

using probe::check;


enum class Variant { CopyOnly, WriteHost, WriteDevice, Rotate2, Rotate4, SideWrite };
constexpr struct {
  Variant variant;
  const char* name;
} kVariants[] = {{Variant::CopyOnly, "copy only"},
                 {Variant::WriteHost, "copy+write host"},
                 {Variant::WriteDevice, "copy+write dev"},
                 {Variant::Rotate2, "rot2 copy+write host"},
                 {Variant::Rotate4, "rot4 copy+write host"},
                 {Variant::SideWrite, "copy;event->side write(2)"}};

constexpr int kStreams = 5, kMessages = 200, kRepeats = 7, kDestinations = 16, kEvents = 64;
constexpr std::size_t kMaxBytes = std::size_t{4} << 20;

}  // namespace

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  check(cudaSetDevice(device), "cudaSetDevice");
  const probe::StreamValueOp write_value = probe::stream_value_op("cuStreamWriteValue32");
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");

  char *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, kMaxBytes), "cudaMalloc");
  check(cudaMalloc(&dst, kMaxBytes * kDestinations), "cudaMalloc");
  unsigned *host_words = nullptr, *device_words = nullptr, *gate = nullptr;
  check(cudaHostAlloc(&host_words, kMessages * sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  check(cudaMalloc(&device_words, kMessages * sizeof(unsigned)), "cudaMalloc");
  check(cudaHostAlloc(&gate, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  cudaStream_t streams[kStreams];
  for (auto& s : streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t events[kEvents];
  for (auto& e : events) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");

  std::printf("%-28s", "bytes");
  for (std::size_t b = 4096; b <= kMaxBytes; b *= 4) std::printf("%10zu", b);
  std::printf("   (us per message)\n");
  unsigned generation = 0;
  for (const auto& [variant, name] : kVariants) {
    std::printf("%-28s", name);
    for (std::size_t bytes = 4096; bytes <= kMaxBytes; bytes *= 4) {
      std::vector<float> per_message;
      for (int repeat = 0; repeat < kRepeats; ++repeat) {
        ++generation;
        *gate = 0;
        for (auto& s : streams) check(wait_value(s, reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
        check(cudaEventRecord(start, streams[0]), "cudaEventRecord");
        for (int i = 1; i < kStreams; ++i) check(cudaStreamWaitEvent(streams[i], start, 0), "cudaStreamWaitEvent");
        for (int i = 0; i < kMessages; ++i) {
          char* to = dst + static_cast<std::size_t>(i % kDestinations) * bytes;
          const auto word = reinterpret_cast<CUdeviceptr>(host_words + i);
          cudaStream_t s = variant == Variant::Rotate2 ? streams[i % 2]
                           : variant == Variant::Rotate4 ? streams[i % 4]
                                                         : streams[0];
          check(cudaMemcpyAsync(to, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
          switch (variant) {
            case Variant::CopyOnly: break;
            case Variant::WriteHost:
            case Variant::Rotate2:
            case Variant::Rotate4: check(write_value(s, word, generation, 0), "write value"); break;
            case Variant::WriteDevice:
              check(write_value(s, reinterpret_cast<CUdeviceptr>(device_words + i), generation, 0), "write value");
              break;
            case Variant::SideWrite: {
              cudaStream_t side = streams[1 + i % 2];
              check(cudaEventRecord(events[i % kEvents], s), "cudaEventRecord");
              check(cudaStreamWaitEvent(side, events[i % kEvents], 0), "cudaStreamWaitEvent");
              check(write_value(side, word, generation, 0), "write value");
              break;
            }
          }
        }
        for (int i = 1; i < kStreams; ++i) {
          check(cudaEventRecord(events[i], streams[i]), "cudaEventRecord");
          check(cudaStreamWaitEvent(streams[0], events[i], 0), "cudaStreamWaitEvent");
        }
        per_message.push_back(probe::open_gate_and_time(gate, streams[0], start, stop) * 1000.f / kMessages);
      }
      std::printf("%10.2f", probe::median(per_message));
    }
    std::printf("\n");
  }

  // Ping-pong: stream 0 copies and raises flag B; stream 1 waits for B, copies and raises flag A; stream 0 waits for
  // A before its next copy. us per hop (half a round trip), median of 7 repeats of 100 round trips.
  constexpr int kRoundTrips = 100;
  unsigned *host_flags = nullptr, *device_flags = nullptr;
  check(cudaHostAlloc(&host_flags, 2 * sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  check(cudaMalloc(&device_flags, 2 * sizeof(unsigned)), "cudaMalloc");
  const struct {
    const char* name;
    bool host;
    bool copy;
  } hops[] = {{"ping-pong flags in host memory", true, true},
              {"ping-pong flags in device memory", false, true},
              {"ping-pong host flags, no copy", true, false},
              {"ping-pong device flags, no copy", false, false}};
  std::printf("\n%-34s", "bytes");
  for (std::size_t b = 4096; b <= kMaxBytes; b *= 16) std::printf("%10zu", b);
  std::printf("   (us per hop)\n");
  for (const auto& hop : hops) {
    std::printf("%-34s", hop.name);
    unsigned* flags = hop.host ? host_flags : device_flags;
    const auto flag_a = reinterpret_cast<CUdeviceptr>(flags), flag_b = reinterpret_cast<CUdeviceptr>(flags + 1);
    for (std::size_t bytes = 4096; bytes <= kMaxBytes; bytes *= 16) {
      std::vector<float> per_hop;
      unsigned round = 0;
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      if (hop.host) {
        flags[0] = flags[1] = 0;
      } else {
        check(cudaMemset(flags, 0, 2 * sizeof(unsigned)), "cudaMemset");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      }
      for (int repeat = 0; repeat < kRepeats; ++repeat) {
        *gate = 0;
        check(wait_value(streams[0], reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
        check(cudaEventRecord(start, streams[0]), "cudaEventRecord");
        for (int i = 0; i < kRoundTrips; ++i) {
          ++round;
          if (hop.copy) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, streams[0]), "copy");
          check(write_value(streams[0], flag_b, round, 0), "write value");
          check(wait_value(streams[1], flag_b, round, CU_STREAM_WAIT_VALUE_GEQ), "wait value");
          if (hop.copy) check(cudaMemcpyAsync(dst + bytes, src, bytes, cudaMemcpyDeviceToDevice, streams[1]), "copy");
          check(write_value(streams[1], flag_a, round, 0), "write value");
          check(wait_value(streams[0], flag_a, round, CU_STREAM_WAIT_VALUE_GEQ), "wait value");
        }
        per_hop.push_back(probe::open_gate_and_time(gate, streams[0], start, stop) * 1000.f / (2 * kRoundTrips));
      }
      std::printf("%10.2f", probe::median(per_hop));
    }
    std::printf("\n");
  }
  return 0;
}
