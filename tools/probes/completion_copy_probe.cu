// completion_copy_probe: what marking a copy-engine send complete costs: a write-value, or a 4-byte copy of the value.
//
// pickle's ipc transport follows each data copy with cuStreamWriteValue32 of the receiver's completion word (its
// memory barrier makes the data visible first). send_completion_probe measured that cost with copies inside one GPU,
// which CUDA runs as SM work (local_copy_probe, docs/results/2026-11-29-h200.md); this probe copies where only a copy
// engine does: into GPU 1 (peer access) when there is one, else into pinned host memory. A stream runs its
// operations in order, each after the one before has completed, so a 4-byte copy of the value after the data copy
// is as ordered as the write-value (NCCL's copy-engine collectives signal that way, src/ce_coll.cc); the question is
// which of the two leaves the copy engine the shorter gap.
//
// Part 1, back-to-back messages on one stream (200 per repeat, median of 7 repeats, every stream held at a gate until
// all is enqueued), us per message:
//   copy only              the data copies alone: the copy engine's own rate
//   copy+write             each copy followed by cuStreamWriteValue32 of its word (default flags: with the barrier;
//                          pickle's ipc completion now)
//   copy+copy4 host        each copy followed by a 4-byte copy of the value from pinned host memory (the host
//                          writes the value there before it enqueues the copy); into GPU 1 only: a copy between two
//                          host buffers is the CPU's, after the stream has got there, so behind the gate it hangs
//   copy+copy4 device      the same from this GPU's memory (values staged beforehand)
//   wlocal+copy+copy4      a write-value of the value into this GPU's memory before the data copy, then the data, then
//                          the 4-byte copy of that word: how a transport whose values are not known in advance would
//                          do it (a completion's value is the receiver's slot generation)
//   copy+event             each copy followed by an event record only (no completion): what marking a point costs
//                          the copy stream
//   copy, write on 2nd     each copy followed by an event record; a second stream waits for that event and writes the
//                          word: the completion leaves the copy stream, so that the next copy need not wait for it
//                          (time until the second stream's last write)
// Then the same marks with the words in pinned host memory, where pickle keeps its completion words, whatever the
// data's target (host words):
//   copy+write             pickle's PICKLE_IPC_COMPLETION=stream
//   copy, write on 2nd     an event per message, as above
//   2nd, one event         one event re-recorded after each copy and waited for by the second stream at once:
//                          pickle's completion lanes (src/transport/ipc/completion_lanes.cpp)
//   2nd and 3rd            an event per message, the writes taken in turn by two streams: whether two lanes per
//                          stream would keep up with copies that one lane's writes (about 3.4 us each) hold back.
//                          (A write without its memory barrier, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER, was refused
//                          there: CUDA_ERROR_INVALID_VALUE, two H200s, driver 580.159.04, 2026-12-01d call 6.)
// After every repeat each word must hold its message's value and every destination byte the source's (checked).
// Part 2 (two GPUs only): a ping-pong, one hop = wait for the flag, copy 4 KiB or 1 MiB to the other GPU, mark its
// flag there (write-value, 4-byte copy of a value staged in device memory, write-value into this GPU's memory then
// its 4-byte copy, or write-value from a second stream after an event: the latency that hand-off adds), us per hop;
// flags in each GPU's memory, then in pinned host memory (where pickle keeps them).
//
// Not part of pickle's library or tests: a measurement for the ipc transport's design. Usage: completion_copy_probe
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "probe_check.hpp"

namespace {

using probe::check;

enum class Mark {
  None,
  Write,
  CopyFromHost,
  CopyFromDevice,
  StagedCopy,
  Event,
  WriteOnSecond,
  WriteOnSecondOneEvent,
  WriteOnTwo
};
constexpr struct {
  Mark mark;
  const char* name;
  bool host_words;  // the completion words in pinned host memory, not the target's
} kMarks[] = {{Mark::None, "copy only", false},
              {Mark::Write, "copy+write", false},
              {Mark::CopyFromHost, "copy+copy4 host", false},
              {Mark::CopyFromDevice, "copy+copy4 device", false},
              {Mark::StagedCopy, "wlocal+copy+copy4", false},
              {Mark::Event, "copy+event", false},
              {Mark::WriteOnSecond, "copy, write on 2nd", false},
              {Mark::Write, "host words: copy+write", true},
              {Mark::WriteOnSecond, "host words: write on 2nd", true},
              {Mark::WriteOnSecondOneEvent, "host words: 2nd, 1 event", true},
              {Mark::WriteOnTwo, "host words: 2nd and 3rd", true}};

constexpr int kMessages = 200, kRepeats = 7, kDestinations = 16;
constexpr std::size_t kMaxBytes = std::size_t{4} << 20;
constexpr unsigned char kSourceByte = 0x5a;

/// Where the messages go: GPU 1's memory or pinned host memory (both written only by a copy engine).
struct Target {
  bool peer = false;
  char* data = nullptr;            // kDestinations slots of kMaxBytes
  unsigned* words = nullptr;       // kMessages completion words
  unsigned* host_words = nullptr;  // kMessages completion words in pinned host memory (pickle's place for them)
};

Target make_target(int gpus) {
  Target target;
  target.peer = gpus >= 2;
  if (target.peer) {
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, 0, 1), "cudaDeviceCanAccessPeer");
    if (can == 0) {
      std::fprintf(stderr, "completion_copy_probe: GPU 0 cannot access GPU 1\n");
      std::exit(1);
    }
    check(cudaDeviceEnablePeerAccess(1, 0), "cudaDeviceEnablePeerAccess 0->1");
    check(cudaSetDevice(1), "cudaSetDevice 1");
    check(cudaDeviceEnablePeerAccess(0, 0), "cudaDeviceEnablePeerAccess 1->0");
    check(cudaMalloc(&target.data, kMaxBytes * kDestinations), "cudaMalloc peer data");
    check(cudaMalloc(&target.words, kMessages * sizeof(unsigned)), "cudaMalloc peer words");
    check(cudaSetDevice(0), "cudaSetDevice 0");
  } else {
    check(cudaHostAlloc(&target.data, kMaxBytes * kDestinations, cudaHostAllocMapped), "cudaHostAlloc data");
    check(cudaHostAlloc(&target.words, kMessages * sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc words");
  }
  check(cudaHostAlloc(&target.host_words, kMessages * sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc words");
  return target;
}

/// Zeroes `bytes` at `ptr` of the target (synchronously).
void clear(const Target& target, void* ptr, std::size_t bytes) {
  if (target.peer) {
    check(cudaMemset(ptr, 0, bytes), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  } else {
    std::memset(ptr, 0, bytes);
  }
}

/// Wrong destination bytes and words after a series (the words must hold `values`); both 0 when all arrived.
std::size_t wrong_after(const Target& target, const unsigned* target_words, std::size_t bytes,
                        const std::vector<unsigned>& values, std::vector<unsigned char>& scratch,
                        std::vector<unsigned>& words, bool check_words) {
  std::size_t wrong = 0;
  const int slots = std::min(kMessages, kDestinations);
  scratch.resize(bytes);
  for (int slot = 0; slot < slots; ++slot) {
    check(cudaMemcpy(scratch.data(), target.data + static_cast<std::size_t>(slot) * bytes, bytes, cudaMemcpyDefault),
          "cudaMemcpy check");
    for (unsigned char byte : scratch) wrong += byte != kSourceByte ? 1 : 0;
  }
  if (check_words) {
    words.resize(kMessages);
    check(cudaMemcpy(words.data(), target_words, kMessages * sizeof(unsigned), cudaMemcpyDefault), "cudaMemcpy words");
    for (std::size_t i = 0; i < words.size(); ++i) wrong += words[i] != values[i] ? 1 : 0;
  }
  return wrong;
}

void back_to_back(const Target& target) {
  const probe::StreamValueOp write_value = probe::stream_value_op("cuStreamWriteValue32");
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  char* src = nullptr;
  check(cudaMalloc(&src, kMaxBytes), "cudaMalloc");
  check(cudaMemset(src, kSourceByte, kMaxBytes), "cudaMemset");
  unsigned *host_values = nullptr, *device_values = nullptr, *gate = nullptr;
  check(cudaHostAlloc(&host_values, kMessages * sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  check(cudaMalloc(&device_values, kMessages * sizeof(unsigned)), "cudaMalloc");
  check(cudaHostAlloc(&gate, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  cudaStream_t stream, second, third;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&third, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<cudaEvent_t> copied(kMessages);  // one per message: each marks its copy's end
  for (cudaEvent_t& event : copied) check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  cudaEvent_t second_done, third_done;
  check(cudaEventCreateWithFlags(&second_done, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&third_done, cudaEventDisableTiming), "cudaEventCreate");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<unsigned> values(kMessages), words;
  std::vector<unsigned char> scratch;

  std::printf("%-24s", "bytes");
  for (std::size_t b = 4096; b <= kMaxBytes; b *= 4) std::printf("%10zu", b);
  std::printf("   (us per message, into %s)\n", target.peer ? "GPU 1" : "pinned host memory");
  unsigned generation = 0;
  for (const auto& [mark, name, host_words] : kMarks) {
    if (mark == Mark::CopyFromHost && !target.peer) continue;
    unsigned* const target_words = host_words ? target.host_words : target.words;
    std::printf("%-24s", name);
    std::size_t wrong = 0;
    for (std::size_t bytes = 4096; bytes <= kMaxBytes; bytes *= 4) {
      std::vector<float> per_message;
      for (int repeat = 0; repeat < kRepeats; ++repeat) {
        ++generation;
        for (int i = 0; i < kMessages; ++i) values[static_cast<std::size_t>(i)] = generation * 1000u + i;
        if (mark == Mark::StagedCopy) {
          check(cudaMemset(device_values, 0, kMessages * sizeof(unsigned)), "cudaMemset values");
        } else {
          check(cudaMemcpy(device_values, values.data(), kMessages * sizeof(unsigned), cudaMemcpyDefault), "values");
        }
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        clear(target, target.data, bytes * kDestinations);
        if (host_words) {
          std::memset(target_words, 0, kMessages * sizeof(unsigned));
        } else {
          clear(target, target_words, kMessages * sizeof(unsigned));
        }
        *gate = 0;
        check(wait_value(stream, reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
        check(cudaEventRecord(start, stream), "cudaEventRecord");
        for (int i = 0; i < kMessages; ++i) {
          char* to = target.data + static_cast<std::size_t>(i % kDestinations) * bytes;
          unsigned* word = target_words + i;
          const unsigned value = values[static_cast<std::size_t>(i)];
          if (mark == Mark::StagedCopy) {
            check(write_value(stream, reinterpret_cast<CUdeviceptr>(device_values + i), value, 0), "write local");
          }
          check(cudaMemcpyAsync(to, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync data");
          switch (mark) {
            case Mark::None:
              break;
            case Mark::Write:
              check(write_value(stream, reinterpret_cast<CUdeviceptr>(word), value, 0), "write value");
              break;
            case Mark::CopyFromHost:
              host_values[i] = value;  // before the copy that reads it is enqueued
              check(cudaMemcpyAsync(word, host_values + i, sizeof(unsigned), cudaMemcpyDefault, stream), "copy4");
              break;
            case Mark::CopyFromDevice:
            case Mark::StagedCopy:
              check(cudaMemcpyAsync(word, device_values + i, sizeof(unsigned), cudaMemcpyDefault, stream), "copy4");
              break;
            case Mark::Event:
              check(cudaEventRecord(copied[static_cast<std::size_t>(i)], stream), "cudaEventRecord");
              break;
            case Mark::WriteOnSecond:
            case Mark::WriteOnSecondOneEvent:
            case Mark::WriteOnTwo: {
              // One event re-recorded: a wait takes the event's latest record, this copy's end.
              cudaEvent_t event = copied[mark == Mark::WriteOnSecondOneEvent ? 0 : static_cast<std::size_t>(i)];
              cudaStream_t writer = mark == Mark::WriteOnTwo && i % 2 == 1 ? third : second;
              check(cudaEventRecord(event, stream), "cudaEventRecord");
              check(cudaStreamWaitEvent(writer, event, 0), "cudaStreamWaitEvent");
              check(write_value(writer, reinterpret_cast<CUdeviceptr>(word), value, 0), "write value");
              break;
            }
          }
        }
        // The time runs to the last write of the second (and third) stream.
        const bool on_second =
            mark == Mark::WriteOnSecond || mark == Mark::WriteOnSecondOneEvent || mark == Mark::WriteOnTwo;
        if (on_second) {
          check(cudaEventRecord(second_done, second), "cudaEventRecord");
          check(cudaStreamWaitEvent(stream, second_done, 0), "cudaStreamWaitEvent");
        }
        if (mark == Mark::WriteOnTwo) {
          check(cudaEventRecord(third_done, third), "cudaEventRecord");
          check(cudaStreamWaitEvent(stream, third_done, 0), "cudaStreamWaitEvent");
        }
        per_message.push_back(probe::open_gate_and_time(gate, stream, start, stop) * 1000.f / kMessages);
        wrong +=
            wrong_after(target, target_words, bytes, values, scratch, words, mark != Mark::None && mark != Mark::Event);
      }
      std::printf("%10.2f", probe::median(per_message));
    }
    std::printf("   %s\n", wrong == 0 ? "data ok" : (std::to_string(wrong) + " wrong").c_str());
  }
}

/// Part 2: a ping-pong between GPU 0 and GPU 1. Each hop waits for its flag, copies the data to the other GPU and
/// marks that GPU's flag: by a write-value, by a 4-byte copy of the round's value staged beforehand in the sending
/// GPU's memory, or by a write-value of the value into the sending GPU's own memory followed by its 4-byte copy (the
/// form a transport needs when the value is known only at match time). The flags live in each GPU's memory, or in
/// pinned host memory as pickle's signal words do. After every row each flag must hold the last round.
enum class HopMark { Write, StagedCopy, LocalWriteCopy, WriteOnSecond };

void ping_pong() {
  const probe::StreamValueOp write_value = probe::stream_value_op("cuStreamWriteValue32");
  const probe::StreamValueOp wait_value = probe::stream_value_op("cuStreamWaitValue32");
  constexpr int kRoundTrips = 100;
  constexpr std::size_t kHopMax = std::size_t{1} << 20;
  char* data[2];
  unsigned* device_flag[2];  // device_flag[g]: on GPU g, written by the other GPU
  unsigned* host_flag[2];    // host_flag[g]: pinned host memory that GPU g waits on, written by the other GPU
  unsigned* rounds[2];       // rounds[g]: on GPU g, the values 1..kRoundTrips * kRepeats, sources of the 4-byte copies
  unsigned* local_value[2];  // local_value[g]: on GPU g, written by its own stream just before the data copy
  cudaStream_t stream[2], second[2];  // second[g]: writes the flag after an event of stream[g] (WriteOnSecond)
  cudaEvent_t copied[2];
  std::vector<unsigned> all_rounds(kRoundTrips * kRepeats);
  for (std::size_t i = 0; i < all_rounds.size(); ++i) all_rounds[i] = static_cast<unsigned>(i + 1);
  for (int g = 0; g < 2; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    check(cudaMalloc(&data[g], 2 * kHopMax), "cudaMalloc");
    check(cudaMalloc(&device_flag[g], sizeof(unsigned)), "cudaMalloc");
    check(cudaHostAlloc(&host_flag[g], sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    check(cudaMalloc(&local_value[g], sizeof(unsigned)), "cudaMalloc");
    check(cudaMalloc(&rounds[g], all_rounds.size() * sizeof(unsigned)), "cudaMalloc");
    check(cudaMemcpy(rounds[g], all_rounds.data(), all_rounds.size() * sizeof(unsigned), cudaMemcpyDefault), "rounds");
    check(cudaStreamCreateWithFlags(&stream[g], cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&second[g], cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&copied[g], cudaEventDisableTiming), "cudaEventCreate");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  unsigned* gate = nullptr;
  check(cudaHostAlloc(&gate, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::printf("\n%-34s%10s%10s   (us per hop, GPU 0 <-> GPU 1)\n", "ping-pong", "4096", "1048576");
  const struct {
    HopMark mark;
    const char* name;
  } marks[] = {{HopMark::Write, "copy+write"},
               {HopMark::StagedCopy, "copy+copy4 device"},
               {HopMark::LocalWriteCopy, "wlocal+copy+copy4"},
               {HopMark::WriteOnSecond, "copy, write on 2nd"}};
  for (bool host_flags : {false, true}) {
    unsigned** flag = host_flags ? host_flag : device_flag;
    for (const auto& [mark, name] : marks) {
      std::printf("%-34s", (std::string(name) + (host_flags ? ", flags in host" : ", flags in GPU")).c_str());
      std::size_t wrong = 0;
      for (std::size_t bytes : {std::size_t{4096}, kHopMax}) {
        for (int g = 0; g < 2; ++g) {
          check(cudaSetDevice(g), "cudaSetDevice");
          check(cudaMemset(device_flag[g], 0, sizeof(unsigned)), "cudaMemset");
          *host_flag[g] = 0;
          check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        }
        check(cudaSetDevice(0), "cudaSetDevice");
        std::vector<float> per_hop;
        unsigned round = 0;
        for (int repeat = 0; repeat < kRepeats; ++repeat) {
          *gate = 0;  // holds GPU 0's stream (and so the whole chain) until every hop is enqueued
          check(wait_value(stream[0], reinterpret_cast<CUdeviceptr>(gate), 1, CU_STREAM_WAIT_VALUE_GEQ), "gate");
          check(cudaEventRecord(start, stream[0]), "cudaEventRecord");
          for (int i = 0; i < kRoundTrips; ++i) {
            ++round;
            for (int g = 0; g < 2; ++g) {
              const int other = 1 - g;
              if (g == 1) {
                check(wait_value(stream[1], reinterpret_cast<CUdeviceptr>(flag[1]), round, CU_STREAM_WAIT_VALUE_GEQ),
                      "wait value");
              }
              if (mark == HopMark::LocalWriteCopy) {
                check(write_value(stream[g], reinterpret_cast<CUdeviceptr>(local_value[g]), round, 0), "wlocal");
              }
              check(cudaMemcpyAsync(data[other] + (g == 0 ? 0 : kHopMax), data[g], bytes, cudaMemcpyDefault, stream[g]),
                    "copy");
              if (mark == HopMark::Write) {
                check(write_value(stream[g], reinterpret_cast<CUdeviceptr>(flag[other]), round, 0), "write value");
              } else if (mark == HopMark::WriteOnSecond) {
                check(cudaEventRecord(copied[g], stream[g]), "cudaEventRecord");
                check(cudaStreamWaitEvent(second[g], copied[g], 0), "cudaStreamWaitEvent");
                check(write_value(second[g], reinterpret_cast<CUdeviceptr>(flag[other]), round, 0), "write value");
              } else {
                const unsigned* value = mark == HopMark::StagedCopy ? rounds[g] + (round - 1) : local_value[g];
                check(cudaMemcpyAsync(flag[other], value, sizeof(unsigned), cudaMemcpyDefault, stream[g]), "copy4");
              }
              if (g == 0) continue;
              check(wait_value(stream[0], reinterpret_cast<CUdeviceptr>(flag[0]), round, CU_STREAM_WAIT_VALUE_GEQ),
                    "wait value");
            }
          }
          per_hop.push_back(probe::open_gate_and_time(gate, stream[0], start, stop) * 1000.f / (2 * kRoundTrips));
        }
        std::printf("%10.2f", probe::median(per_hop));
        check(cudaStreamSynchronize(stream[1]), "cudaStreamSynchronize");
        for (int g = 0; g < 2; ++g) {
          unsigned seen = 0;
          check(cudaMemcpy(&seen, flag[g], sizeof(unsigned), cudaMemcpyDefault), "cudaMemcpy flag");
          wrong += seen != round ? 1 : 0;
        }
      }
      std::printf("   %s\n", wrong == 0 ? "flags ok" : (std::to_string(wrong) + " flags wrong").c_str());
    }
  }
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a probe stopped at its time limit keeps the lines it finished
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 1) {
    std::printf("completion_copy_probe: needs a GPU; nothing to measure\n");
    return 0;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  const Target target = make_target(gpus);
  back_to_back(target);
  if (target.peer) ping_pong();
  return 0;
}
