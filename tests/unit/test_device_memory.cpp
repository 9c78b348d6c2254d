// Host memory, allocation lookup, descriptors and the missing-GPU path, in one process. The cross-process
// versions live in tests/mp/test_device_host.cpp.

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <pickle/error.hpp>

#include "device/backends.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"

namespace pickle::device {
namespace {

TEST(DeviceMemory, HostAllocationIsZeroedWritableAndDescribed) {
  auto a = allocate(MemoryKind::Host, 4096 + 3);
  ASSERT_NE(a->data(), nullptr);
  EXPECT_EQ(a->bytes(), 4096u + 3);
  EXPECT_EQ(a->kind(), MemoryKind::Host);
  EXPECT_EQ(a->device(), -1);
  EXPECT_EQ(a->method(), AllocMethod::Default);
  auto* bytes = static_cast<unsigned char*>(a->data());
  for (std::size_t i = 0; i < a->bytes(); ++i) ASSERT_EQ(bytes[i], 0) << i;
  std::memset(bytes, 0xab, a->bytes());
  EXPECT_EQ(bytes[a->bytes() - 1], 0xab);
}

TEST(DeviceMemory, IdsDifferAndShareTheProcessPrefix) {
  auto a = allocate(MemoryKind::Host, 1);
  auto b = allocate(MemoryKind::Host, 1);
  EXPECT_NE(a->id(), b->id());
  EXPECT_EQ(a->id() >> 40, b->id() >> 40);
}

TEST(DeviceMemory, InvalidRequestsAreRejected) {
  EXPECT_THROW(allocate(MemoryKind::Host, 0), InvalidArgument);
  EXPECT_THROW(allocate(MemoryKind::Cuda, 0), InvalidArgument);
  EXPECT_THROW(allocate(MemoryKind::Host, 16, 0, AllocMethod::CudaVmm), InvalidArgument);
  try {
    allocate(MemoryKind::Host, 0);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("of 0 bytes"), std::string::npos) << e.what();
  }
}

TEST(DeviceMemory, FindAllocationFromInteriorPointers) {
  auto a = allocate(MemoryKind::Host, 10000);
  auto b = allocate(MemoryKind::Host, 64);
  auto* base = static_cast<std::byte*>(a->data());
  for (std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, std::size_t{9999}}) {
    AllocationInfo info = find_allocation(base + offset);
    EXPECT_EQ(info.base, a->data());
    EXPECT_EQ(info.bytes, 10000u);
    EXPECT_EQ(info.offset, offset);
    EXPECT_EQ(info.id, a->id());
    EXPECT_EQ(info.kind, MemoryKind::Host);
    EXPECT_EQ(info.device, -1);
  }
  EXPECT_EQ(find_allocation(b->data()).id, b->id());
  // One past the end belongs to a (unless b happens to start there, which mmap never does for distinct memfds).
  if (base + 10000 != b->data()) {
    EXPECT_THROW(find_allocation(base + 10000), InvalidArgument);
  }
}

TEST(DeviceMemory, UnknownAndFreedPointersAreInvalidArguments) {
  int on_stack = 0;
  try {
    find_allocation(&on_stack);
    FAIL() << "a stack address was found";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is not inside memory allocated by pickle or CUDA"), std::string::npos)
        << e.what();
  }
  auto a = allocate(MemoryKind::Host, 128);
  void* gone = a->data();
  a.reset();
  EXPECT_THROW(find_allocation(gone), InvalidArgument);
}

// What the ipc transport's releases rely on: an allocation is alive until freed, and a new allocation at the same
// address (the host allocator may hand it out again) is another allocation.
TEST(DeviceMemory, AFreedHostAllocationIsNoLongerAliveEvenAtTheSameAddress) {
  auto a = allocate(MemoryKind::Host, 4096);
  AllocationInfo info = find_allocation(static_cast<char*>(a->data()) + 100);
  EXPECT_TRUE(allocation_alive(info.base, info.id));
  a.reset();
  EXPECT_FALSE(allocation_alive(info.base, info.id));
  std::vector<std::unique_ptr<Allocation>> later;  // until one lands at the freed address, or 64 tries
  for (int i = 0; i < 64; ++i) {
    later.push_back(allocate(MemoryKind::Host, 4096));
    if (later.back()->data() == info.base) break;
  }
  EXPECT_FALSE(allocation_alive(info.base, info.id));
  if (later.back()->data() == info.base) {
    EXPECT_TRUE(allocation_alive(info.base, later.back()->id()));
  }
  int on_stack = 0;
  EXPECT_FALSE(allocation_alive(&on_stack, info.id));
}

// What the net transport's registrations rely on: a kept mapping outlives the Allocation (its bytes stay readable and
// writable at the same address, though the allocation is gone), and the memory is unmapped once the last handle goes.
TEST(DeviceMemory, AKeptHostMappingOutlivesItsAllocationAndThenGoes) {
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  auto allocation = allocate(MemoryKind::Host, kBytes);
  auto* bytes = static_cast<unsigned char*>(allocation->data());
  std::memset(bytes, 0x5a, kBytes);
  std::shared_ptr<const void> kept = keep_host_mapping(bytes + 4097);  // any interior pointer
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept.get(), allocation->data());
  std::shared_ptr<const void> second = keep_host_mapping(bytes);

  allocation.reset();
  EXPECT_THROW(find_allocation(bytes), InvalidArgument) << "the allocation is freed";
  EXPECT_EQ(keep_host_mapping(bytes), nullptr) << "a freed allocation hands out no new handle";
  EXPECT_EQ(bytes[kBytes - 1], 0x5a);
  bytes[12345] = 0xa5;  // a late write lands in mapped memory, not in a hole
  EXPECT_EQ(bytes[12345], 0xa5);

  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident(kBytes / static_cast<std::size_t>(page) + 1);
  kept.reset();
  EXPECT_EQ(::mincore(bytes, kBytes, resident.data()), 0) << "one handle is left: still mapped";
  second.reset();
  errno = 0;
  EXPECT_EQ(::mincore(bytes, kBytes, resident.data()), -1) << "the last handle went: unmapped";
  EXPECT_EQ(errno, ENOMEM);

  int on_stack = 0;
  EXPECT_EQ(keep_host_mapping(&on_stack), nullptr) << "not a pickle host allocation";
}

TEST(DeviceMemory, HostExportImportSharesTheBytes) {
  auto a = allocate(MemoryKind::Host, 8192);
  auto* base = static_cast<unsigned char*>(a->data());
  ExportedMemory exported = export_memory(base + 100);
  EXPECT_EQ(exported.offset, 100u);
  EXPECT_TRUE(exported.fd.valid());
  EXPECT_EQ(exported.descriptor.bytes, 8192u);
  EXPECT_EQ(exported.descriptor.id, a->id());
  EXPECT_EQ(exported.descriptor.base, reinterpret_cast<std::uint64_t>(a->data()));
  MemoryDescriptor parsed = parse_descriptor(serialize(exported.descriptor));
  auto imported = import_memory(parsed, std::move(exported.fd));
  ASSERT_EQ(imported->bytes(), 8192u);
  EXPECT_NE(imported->data(), a->data());  // a second mapping of the same pages
  auto* view = static_cast<unsigned char*>(imported->data());
  for (int i = 0; i < 8192; ++i) view[i] = static_cast<unsigned char>(i * 7);
  for (int i = 0; i < 8192; ++i) ASSERT_EQ(base[i], static_cast<unsigned char>(i * 7)) << i;
}

TEST(DeviceMemory, HostImportNeedsALargeEnoughFd) {
  auto small = allocate(MemoryKind::Host, 4096);
  ExportedMemory exported = export_memory(small->data());
  MemoryDescriptor lie = exported.descriptor;
  lie.bytes = 1 << 20;
  EXPECT_THROW(import_memory(lie, std::move(exported.fd)), ProtocolError);
  EXPECT_THROW(import_memory(exported.descriptor, UniqueFd()), InvalidArgument);
}

MemoryDescriptor sample(MemoryKind kind, AllocMethod method) {
  MemoryDescriptor d{.kind = kind,
                     .method = method,
                     .device = kind == MemoryKind::Host ? -1 : 1,
                     .pid = 4242,
                     .bytes = (1ull << 30) + 4096,
                     .id = 0x123456789abcdefull,
                     .base = 0x7f0000001000ull};
  for (std::size_t i = 0; i < d.ipc_handle.size(); ++i) d.ipc_handle[i] = static_cast<std::byte>(i * 3 + 1);
  return d;
}

TEST(DeviceDescriptor, RoundTripsEveryKindAndMethod) {
  for (auto [kind, method] : {std::pair{MemoryKind::Host, AllocMethod::Default},
                              std::pair{MemoryKind::Cuda, AllocMethod::CudaMalloc},
                              std::pair{MemoryKind::Cuda, AllocMethod::CudaVmm}}) {
    MemoryDescriptor d = sample(kind, method);
    auto bytes = serialize(d);
    EXPECT_EQ(bytes.size(), d.has_ipc_handle() ? kDescriptorBytesWithHandle : kDescriptorBytes);
    MemoryDescriptor back = parse_descriptor(bytes);
    EXPECT_EQ(back.kind, d.kind);
    EXPECT_EQ(back.method, d.method);
    EXPECT_EQ(back.device, d.device);
    EXPECT_EQ(back.pid, d.pid);
    EXPECT_EQ(back.bytes, d.bytes);
    EXPECT_EQ(back.id, d.id);
    EXPECT_EQ(back.base, d.base);
    if (d.has_ipc_handle()) {
      EXPECT_EQ(back.ipc_handle, d.ipc_handle);
    }
  }
}

TEST(DeviceDescriptor, RejectsTruncatedAndOversizedInput) {
  for (auto method : {AllocMethod::CudaMalloc, AllocMethod::CudaVmm}) {
    auto bytes = serialize(sample(MemoryKind::Cuda, method));
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_THROW(parse_descriptor(std::span(bytes.data(), n)), ProtocolError) << n;
    }
    bytes.push_back(std::byte{0});
    EXPECT_THROW(parse_descriptor(bytes), ProtocolError);
  }
}

TEST(DeviceDescriptor, RejectsGarbageAndInconsistentFields) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 1000; ++trial) {
    std::vector<std::byte> junk(kDescriptorBytes + (trial % 2) * 64);
    for (auto& b : junk) b = static_cast<std::byte>(random());
    EXPECT_THROW(parse_descriptor(junk), ProtocolError);
  }
  auto corrupt = [](MemoryDescriptor d, std::size_t at, std::byte value) {
    auto bytes = serialize(d);
    bytes[at] = value;
    return bytes;
  };
  MemoryDescriptor host = sample(MemoryKind::Host, AllocMethod::Default);
  EXPECT_THROW(parse_descriptor(corrupt(host, 4, std::byte{2})), ProtocolError);   // version
  EXPECT_THROW(parse_descriptor(corrupt(host, 6, std::byte{9})), ProtocolError);   // kind
  EXPECT_THROW(parse_descriptor(corrupt(host, 7, std::byte{1})), ProtocolError);   // host with cudaMalloc
  EXPECT_THROW(parse_descriptor(corrupt(host, 7, std::byte{7})), ProtocolError);   // method
  EXPECT_THROW(parse_descriptor(corrupt(host, 8, std::byte{0})), ProtocolError);   // host with a device
  MemoryDescriptor zero = host;
  zero.bytes = 0;
  EXPECT_THROW(parse_descriptor(serialize(zero)), ProtocolError);
  MemoryDescriptor cuda_default = sample(MemoryKind::Cuda, AllocMethod::CudaVmm);
  cuda_default.method = AllocMethod::Default;
  EXPECT_THROW(parse_descriptor(serialize(cuda_default)), ProtocolError);
}

TEST(DeviceCuda, CudaKindWithoutAGpuIsUnavailable) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU; tests/cuda covers it";
  std::string reason = cuda_unavailable_reason();
  EXPECT_FALSE(reason.empty());
  try {
    allocate(MemoryKind::Cuda, 4096);
    FAIL() << "allocated CUDA memory without a GPU";
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_stream(MemoryKind::Cuda, 0), UnavailableError);
  EXPECT_THROW(make_event(MemoryKind::Cuda, 0), UnavailableError);
  MemoryDescriptor d = sample(MemoryKind::Cuda, AllocMethod::CudaMalloc);
  EXPECT_THROW(import_memory(d, UniqueFd(), 0), UnavailableError);
}

}  // namespace
}  // namespace pickle::device
