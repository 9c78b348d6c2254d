// The CUDA backend on one GPU: stream order through cuStreamWriteValue32 / cuStreamWaitValue32, bounded
// synchronize, events, callbacks, allocation lookup. Every test skips with the reason when there is no GPU.

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "cuda_test_util.hpp"
#include "device/backends.hpp"
#include "device/cuda/driver_api.hpp"
#include "device/cuda/vmm.hpp"
#include "device/export.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle::device {
namespace {

using test::PinnedBuffer;

#define PICKLE_REQUIRE_GPUS(n)                                                                              \
  if (cuda_device_count() < (n)) {                                                                          \
    GTEST_SKIP() << "waived: needs " << (n) << " GPU(s), found " << cuda_device_count() << " ("             \
                 << cuda_unavailable_reason() << ")";                                                       \
  }

class ScopedTimeout {
 public:
  explicit ScopedTimeout(const char* seconds) { setenv("PICKLE_TIMEOUT", seconds, 1); }
  ~ScopedTimeout() { unsetenv("PICKLE_TIMEOUT"); }
};

/// A zeroed flag page in device memory (cudaMalloc: 4-byte aligned, device-accessible).
std::unique_ptr<Allocation> zeroed_flags(int device) {
  auto flags = allocate(MemoryKind::Cuda, 4096, device, AllocMethod::CudaMalloc);
  test::cuda_ok(cudaSetDevice(device), "cudaSetDevice");
  test::cuda_ok(cudaMemset(flags->data(), 0, flags->bytes()), "cudaMemset");
  test::cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return flags;
}

TEST(CudaStream, FlagOrdersCopiesBetweenStreams) {
  PICKLE_REQUIRE_GPUS(1);
  constexpr std::size_t kBytes = 64 << 20;
  constexpr std::size_t kWords = kBytes / 8;
  constexpr unsigned kRounds = 4;
  auto flags = zeroed_flags(0);
  auto* flag = static_cast<std::uint32_t*>(flags->data());
  auto* ack = flag + 32;
  auto middle = allocate(MemoryKind::Cuda, kBytes, 0);
  PinnedBuffer sources(kBytes * kRounds), results(kBytes * kRounds);
  for (unsigned r = 0; r < kRounds; ++r) test::fill_pattern(sources.words() + r * kWords, kWords, r + 100);

  auto consumer = make_stream(MemoryKind::Cuda, 0);
  auto producer = make_stream(MemoryKind::Cuda, 0);
  // The consumer is enqueued first: its copies out can only be right if each wait_value really held them back.
  for (unsigned r = 0; r < kRounds; ++r) {
    consumer->wait_value(flag, r + 1);
    consumer->copy(results.words() + r * kWords, middle->data(), kBytes);
    consumer->write_value(ack, r + 1);
  }
  EXPECT_FALSE(consumer->query());
  for (unsigned r = 0; r < kRounds; ++r) {
    producer->wait_value(ack, r);
    producer->copy(middle->data(), sources.words() + r * kWords, kBytes);
    producer->write_value(flag, r + 1);
  }
  consumer->synchronize();
  producer->synchronize();
  for (unsigned r = 0; r < kRounds; ++r) {
    std::size_t bad = test::first_wrong_word(results.words() + r * kWords, kWords, r + 100);
    ASSERT_EQ(bad, kWords) << "round " << r << ": first wrong word " << bad;
  }
}

TEST(CudaStream, SynchronizeOnAnUnsatisfiedWaitTimesOutAndCanBeReleased) {
  PICKLE_REQUIRE_GPUS(1);
  ScopedTimeout timeout("2");
  auto flags = zeroed_flags(0);
  auto* flag = static_cast<std::uint32_t*>(flags->data());
  auto stuck = make_stream(MemoryKind::Cuda, 0);
  auto helper = make_stream(MemoryKind::Cuda, 0);
  PinnedBuffer marker(8);
  marker.words()[0] = 0;
  std::uint64_t one = 1;
  auto* device_one = flag + 64;  // 8 bytes of device memory holding 1, copied out once the wait passes
  test::cuda_ok(cudaMemcpy(device_one, &one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy");
  stuck->wait_value(flag, 5);
  stuck->copy(marker.data(), device_one, sizeof one);
  Stopwatch watch;
  try {
    stuck->synchronize();
    FAIL() << "synchronize returned on a wait that cannot be satisfied";
  } catch (const TimeoutError& e) {
    std::string text = e.what();
    EXPECT_NE(text.find("still busy after 2 s"), std::string::npos) << text;
    EXPECT_NE(text.find("for >= 5"), std::string::npos) << text;
  }
  EXPECT_GE(watch.seconds(), 1.9);
  EXPECT_LT(watch.seconds(), 6.0);
  EXPECT_EQ(marker.words()[0], 0u);
  // Release the stuck stream from another stream before anything is destroyed.
  helper->write_value(flag, 5);
  helper->synchronize();
  stuck->synchronize();
  EXPECT_EQ(marker.words()[0], 1u);
}

TEST(CudaStream, CallbacksRunInOrderAndErrorsSurface) {
  PICKLE_REQUIRE_GPUS(1);
  auto stream = make_stream(MemoryKind::Cuda, 0);
  std::vector<int> seen;
  for (int i = 0; i < 50; ++i) stream->host_callback([&seen, i] { seen.push_back(i); });
  stream->host_callback([] { throw ProtocolError("from a callback"); });
  stream->host_callback([&seen] { seen.push_back(50); });
  EXPECT_THROW(stream->synchronize(), ProtocolError);
  stream->synchronize();
  ASSERT_EQ(seen.size(), 51u);
  for (int i = 0; i <= 50; ++i) EXPECT_EQ(seen[i], i);
}

TEST(CudaEvent, TimesACopyAndOrdersStreams) {
  PICKLE_REQUIRE_GPUS(1);
  constexpr std::size_t kBytes = 256 << 20;
  auto a = allocate(MemoryKind::Cuda, kBytes, 0);
  auto b = allocate(MemoryKind::Cuda, kBytes, 0);
  auto s1 = make_stream(MemoryKind::Cuda, 0);
  auto s2 = make_stream(MemoryKind::Cuda, 0);
  auto start = make_event(MemoryKind::Cuda, 0);
  auto end = make_event(MemoryKind::Cuda, 0);
  auto host_event = make_event(MemoryKind::Host);
  EXPECT_THROW(s1->record(*host_event), InvalidArgument);
  s1->record(*start);
  s1->copy(b->data(), a->data(), kBytes);
  s1->record(*end);
  bool after = false;
  s2->wait(*end);
  s2->host_callback([&] { after = true; });
  s2->synchronize();
  EXPECT_TRUE(after);
  EXPECT_TRUE(end->query());
  float ms = end->elapsed_ms(*start);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 1000.0f);
  std::printf("[info] device-to-device copy of 256 MiB: %.3f ms (%.1f GB/s, read+write counted once)\n", ms,
              kBytes / (ms * 1e6));
}

TEST(CudaMemory, FindAllocationFromInteriorPointers) {
  PICKLE_REQUIRE_GPUS(1);
  for (AllocMethod method : {AllocMethod::CudaMalloc, AllocMethod::CudaVmm, AllocMethod::Default}) {
    SCOPED_TRACE(alloc_method_name(method));
    auto a = allocate(MemoryKind::Cuda, (3 << 20) + 5, 0, method);
    EXPECT_EQ(a->kind(), MemoryKind::Cuda);
    EXPECT_EQ(a->device(), 0);
    EXPECT_NE(a->method(), AllocMethod::Default);
    auto* base = static_cast<std::byte*>(a->data());
    for (std::size_t offset : {std::size_t{0}, std::size_t{12345}, a->bytes() - 1}) {
      AllocationInfo info = find_allocation(base + offset);
      EXPECT_EQ(info.base, a->data());
      EXPECT_GE(info.bytes, a->bytes());
      EXPECT_EQ(info.offset, offset);
      EXPECT_EQ(info.id, a->id());
      EXPECT_EQ(info.kind, MemoryKind::Cuda);
      EXPECT_EQ(info.device, 0);
      EXPECT_EQ(info.method, a->method());
    }
    ExportedMemory exported = export_memory(base + 4096);
    EXPECT_EQ(exported.offset, 4096u);
    EXPECT_EQ(exported.fd.valid(), a->method() == AllocMethod::CudaVmm);
  }
  int on_stack = 0;
  EXPECT_THROW(find_allocation(&on_stack), InvalidArgument);
}

// A growing caching allocator (PyTorch's expandable segments) unmaps a physical block and maps another at the same
// address. The allocation id must change with it: peers key their mappings by id (transport/ipc/mapping_cache.hpp),
// and an id that survived the remapping would send their copies into the old block.
TEST(CudaMemory, AnotherBlockMappedAtTheSameAddressHasAnotherId) {
  PICKLE_REQUIRE_GPUS(1);
  const cuda::DriverApi& api = cuda::driver();
  test::cuda_ok(cudaSetDevice(0), "cudaSetDevice");
  CUmemAllocationProp prop = cuda::VmmMapping::properties(0);
  std::size_t granularity = 0;
  ASSERT_EQ(api.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  CUdeviceptr address = 0;
  ASSERT_EQ(api.cuMemAddressReserve(&address, granularity, granularity, CUdeviceptr{0}, 0ull), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  auto map_block = [&] {
    CUmemGenericAllocationHandle handle{};
    EXPECT_EQ(api.cuMemCreate(&handle, granularity, &prop, 0ull), CUDA_SUCCESS);
    EXPECT_EQ(api.cuMemMap(address, granularity, 0, handle, 0ull), CUDA_SUCCESS);
    EXPECT_EQ(api.cuMemSetAccess(address, granularity, &access, 1), CUDA_SUCCESS);
    return handle;
  };
  auto unmap_block = [&](CUmemGenericAllocationHandle handle) {
    EXPECT_EQ(api.cuMemUnmap(address, granularity), CUDA_SUCCESS);
    EXPECT_EQ(api.cuMemRelease(handle), CUDA_SUCCESS);
  };
  void* pointer = reinterpret_cast<void*>(address);
  CUmemGenericAllocationHandle first = map_block();
  AllocationInfo before = find_allocation(pointer);
  EXPECT_TRUE(allocation_alive(before.base, before.id));
  unmap_block(first);
  EXPECT_FALSE(allocation_alive(before.base, before.id)) << "nothing is mapped at the address now";
  CUmemGenericAllocationHandle second = map_block();
  AllocationInfo after = find_allocation(pointer);
  EXPECT_EQ(after.base, before.base);
  EXPECT_NE(after.id, before.id) << "the same id for another physical block at the same address";
  EXPECT_FALSE(allocation_alive(before.base, before.id));
  EXPECT_TRUE(allocation_alive(after.base, after.id));
  unmap_block(second);
  EXPECT_EQ(api.cuMemAddressFree(address, granularity), CUDA_SUCCESS);
}

// What liveness says of pickle's own allocations of each kind, before and after they are freed.
TEST(CudaMemory, AFreedAllocationIsNoLongerAlive) {
  PICKLE_REQUIRE_GPUS(1);
  for (AllocMethod method : {AllocMethod::CudaMalloc, AllocMethod::CudaVmm}) {
    SCOPED_TRACE(alloc_method_name(method));
    auto a = allocate(MemoryKind::Cuda, 1 << 20, 0, method);
    AllocationInfo info = find_allocation(a->data());
    EXPECT_TRUE(allocation_alive(info.base, info.id));
    a.reset();
    EXPECT_FALSE(allocation_alive(info.base, info.id));
  }
}

}  // namespace
}  // namespace pickle::device
