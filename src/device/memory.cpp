#include "device/memory.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"

namespace pickle::device {
namespace {

std::uint64_t process_prefix() {
  // Random rather than the pid: pids repeat across hosts and containers, and ids end up in cache keys and logs.
  std::uint32_t random = 0;
  if (getrandom(&random, sizeof random, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof random)) {
    random = static_cast<std::uint32_t>(getpid()) ^ static_cast<std::uint32_t>(now_ns());
  }
  return random & 0xffffffu;
}

}  // namespace

std::uint64_t make_allocation_id(std::uint64_t local) noexcept {
  static const std::uint64_t prefix = process_prefix();
  return (prefix << 40) | (local & ((std::uint64_t{1} << 40) - 1));
}

std::string_view alloc_method_name(AllocMethod method) noexcept {
  switch (method) {
    case AllocMethod::Default: return "default";
    case AllocMethod::CudaMalloc: return "cudaMalloc";
    case AllocMethod::CudaVmm: return "vmm";
  }
  return "?";
}

std::unique_ptr<Allocation> allocate(MemoryKind kind, std::size_t bytes, int device, AllocMethod method) {
  if (bytes == 0) {
    throw InvalidArgument(describe({.op = cat("allocate ", memory_kind_name(kind), " memory"), .bytes = 0}) +
                          ": the size must be positive");
  }
  if (kind == MemoryKind::Host) {
    if (method != AllocMethod::Default) {
      throw InvalidArgument(cat("allocate host memory: method ", alloc_method_name(method),
                                " applies to CUDA memory only"));
    }
    return host::allocate(bytes);
  }
  return cuda::allocate(bytes, device, method);
}

std::shared_ptr<const void> keep_host_mapping(const void* ptr) { return host::keep_mapping(ptr); }

AllocationInfo find_allocation(const void* ptr) {
  // Host first: a registry lookup, whereas asking CUDA about a pointer costs a driver call.
  if (auto info = host::find_allocation(ptr)) return *info;
  if (auto info = cuda::find_allocation(ptr)) return *info;
  throw InvalidArgument(cat("pointer ", ptr, " is not inside memory allocated by pickle or CUDA"));
}

bool allocation_alive(const void* base, std::uint64_t id) noexcept {
  try {
    return find_allocation(base).id == id;
  } catch (const InvalidArgument&) {
    return false;
  } catch (...) {
    return true;
  }
}

}  // namespace pickle::device
