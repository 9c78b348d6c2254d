// CUDA memory shared between two processes on two GPUs, both ways pickle exports it: cudaMalloc + cudaIpc handle,
// and VMM + POSIX file descriptor. Rank 0 (GPU 0) exports 1 GiB plus a flag; rank 1 (GPU 1) imports it, copies a
// pattern in over P2P with its stream and raises the flag with write_value; rank 0's stream waits on the flag,
// copies the buffer to the host, and every word is checked. Rank 1 imports the allocation twice and writes the flag
// through the second import after closing the first: imports of one allocation in a process share its mapping. Import time and copy bandwidth are printed (not asserted).
// On a machine of one GPU both processes use GPU 0: import and stream memory operations are the same, the copy is
// device-to-device.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/unique_fd.hpp"
#include "cuda_test_util.hpp"
#include "device/backends.hpp"
#include "device/export.hpp"
#include "device/fd_channel.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "subprocess.hpp"

namespace pickle::device {
namespace {

constexpr std::size_t kDataBytes = std::size_t{1} << 30;
constexpr std::size_t kWords = kDataBytes / 8;
constexpr std::size_t kFlagBytes = 4096;  // the flag lives right after the data, inside the same allocation
constexpr std::uint64_t kSeed = 0x5eed;

Deadline peer_deadline() { return Deadline::after_seconds(env::timeout_seconds()); }

AllocMethod parse_method(const std::string& name) {
  if (name == "cudaMalloc") return AllocMethod::CudaMalloc;
  if (name == "vmm") return AllocMethod::CudaVmm;
  throw InvalidArgument("unknown method " + name);
}

PICKLE_CHILD(cuda_ipc_rank0) {
  const std::string& name = args.at(0);
  AllocMethod method = parse_method(args.at(1));
  constexpr int kDevice = 0;
  auto memory = allocate(MemoryKind::Cuda, kDataBytes + kFlagBytes, kDevice, method);
  auto* base = static_cast<std::byte*>(memory->data());
  auto* flag = reinterpret_cast<std::uint32_t*>(base + kDataBytes);
  test::cuda_ok(cudaSetDevice(kDevice), "cudaSetDevice");
  test::cuda_ok(cudaMemset(base, 0, memory->bytes()), "cudaMemset");
  test::cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  test::PinnedBuffer host(kDataBytes);
  std::memset(host.data(), 0, kDataBytes);

  // Enqueue the wait before the peer even has the memory: the copy out may only run once the peer's flag lands.
  auto stream = make_stream(MemoryKind::Cuda, kDevice);
  stream->wait_value(flag, 1);
  stream->copy(host.data(), base, kDataBytes);

  FdListener listener(name);
  FdChannel channel = listener.accept(peer_deadline());
  channel.set_peer(1);
  ExportedMemory exported = export_memory(base);
  if (exported.offset != 0) throw Error(ErrorCode::Internal, "export offset of the base is not 0");
  channel.send(serialize(exported.descriptor), exported.fd.get(), peer_deadline());

  stream->synchronize();
  std::size_t bad = test::first_wrong_word(host.words(), kWords, kSeed);
  if (bad != kWords) {
    std::fprintf(stderr, "rank 0: word %zu is %llx, expected %llx\n", bad,
                 static_cast<unsigned long long>(host.words()[bad]),
                 static_cast<unsigned long long>(bad * test::kGolden + kSeed));
    return 1;
  }
  // Keep the allocation until the importer has unmapped it.
  FdMessage closed = channel.recv(peer_deadline());
  return closed.bytes.size() == 1 ? 0 : 2;
}

PICKLE_CHILD(cuda_ipc_rank1) {
  const std::string& name = args.at(0);
  const std::string& method = args.at(1);
  const int kDevice = cuda_device_count() > 1 ? 1 : 0;
  test::cuda_ok(cudaSetDevice(kDevice), "cudaSetDevice");  // the test's own runtime calls (pinned memory) too
  FdChannel channel = FdChannel::connect(name, peer_deadline());
  channel.set_peer(0);
  FdMessage message = channel.recv(peer_deadline());
  MemoryDescriptor descriptor = parse_descriptor(message.bytes);

  // Prepare the source first, so that the timings below cover only the import and the copy.
  test::PinnedBuffer host(kDataBytes);
  test::fill_pattern(host.words(), kWords, kSeed);
  auto local = allocate(MemoryKind::Cuda, kDataBytes, kDevice);
  auto stream = make_stream(MemoryKind::Cuda, kDevice);
  stream->copy(local->data(), host.data(), kDataBytes);
  stream->synchronize();

  UniqueFd second_fd(message.fd.valid() ? ::dup(message.fd.get()) : -1);
  Stopwatch import_watch;
  auto imported = import_memory(descriptor, std::move(message.fd), kDevice);
  double import_ms = import_watch.micros() / 1000.0;
  // The same allocation imported again in this process, as a second communicator receiving from it does. CUDA opens
  // a cudaIpc handle only once per process ("resource already mapped"): the two imports must share that mapping,
  // and it must outlive the first (the flag below is written through the second after the first is gone).
  auto again = import_memory(descriptor, std::move(second_fd), kDevice);
  if (imported->bytes() < kDataBytes + kFlagBytes) throw Error(ErrorCode::Internal, "imported size too small");
  auto* peer = static_cast<std::byte*>(imported->data());

  auto start = make_event(MemoryKind::Cuda, kDevice);
  auto end = make_event(MemoryKind::Cuda, kDevice);
  stream->record(*start);
  stream->copy(peer, local->data(), kDataBytes);  // GPU 1 -> GPU 0 over P2P
  stream->record(*end);
  stream->synchronize();
  imported.reset();
  stream->write_value(reinterpret_cast<std::uint32_t*>(static_cast<std::byte*>(again->data()) + kDataBytes), 1);
  stream->synchronize();
  float ms = end->elapsed_ms(*start);
  std::printf("[info] %s: import of %s took %.2f ms; P2P copy GPU1 -> GPU0 of 1 GiB: %.3f ms = %.1f GB/s\n",
              method.c_str(), human_bytes(descriptor.bytes).c_str(), import_ms, ms, kDataBytes / (ms * 1e6));
  std::fflush(stdout);

  again.reset();
  std::byte closed{1};
  channel.send(std::span(&closed, 1), peer_deadline());
  return 0;
}

void run_two_ranks(const std::string& method) {
  std::string name = "pickle-test-" + std::to_string(getpid()) + "-cuda-ipc-" + method;
  test::Child rank0("cuda_ipc_rank0", {name, method});
  test::Child rank1("cuda_ipc_rank1", {name, method});
  test::ExitStatus status1 = rank1.wait(std::chrono::seconds(120));
  test::ExitStatus status0 = rank0.wait(std::chrono::seconds(120));
  EXPECT_TRUE(status0.ok()) << "rank 0 " << status0.describe();
  EXPECT_TRUE(status1.ok()) << "rank 1 " << status1.describe();
}

#define PICKLE_REQUIRE_GPUS(n)                                                                              \
  if (cuda_device_count() < (n)) {                                                                          \
    GTEST_SKIP() << "waived: needs " << (n) << " GPU(s), found " << cuda_device_count() << " ("             \
                 << cuda_unavailable_reason() << ")";                                                       \
  }

TEST(CudaIpc, CudaMallocBufferSharedAcrossProcessesAndGpus) {
  PICKLE_REQUIRE_GPUS(1);
  run_two_ranks("cudaMalloc");
}

TEST(CudaIpc, VmmBufferSharedAcrossProcessesAndGpus) {
  PICKLE_REQUIRE_GPUS(1);
  run_two_ranks("vmm");
}

}  // namespace
}  // namespace pickle::device
