// Host memory: memfd-backed shared mappings, the host twin of exportable GPU memory. A memfd (rather than
// shm_open or a file) has no name to clean up, dies with its last reference, and travels as a plain fd.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "device/backends.hpp"

namespace pickle::device::host {
namespace {

/// A shared mapping of `bytes` of `fd`; the mapping is owned, the fd is not.
void* map_shared(int fd, std::size_t bytes, std::string_view op) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) throw SystemError(describe({.op = op, .bytes = bytes}) + ": mmap", errno);
  return data;
}

class HostAllocation;

/// Every live host Allocation of this process, ordered by address, so that any interior pointer finds its
/// allocation (callers hand us sub-ranges of a larger buffer).
class Registry {
 public:
  static Registry& instance() {
    static Registry registry;
    return registry;
  }
  void add(std::uintptr_t base, HostAllocation* allocation) {
    std::lock_guard lock(mutex_);
    by_base_[base] = allocation;
  }
  void remove(std::uintptr_t base) {
    std::lock_guard lock(mutex_);
    by_base_.erase(base);
  }
  /// Calls fn(allocation) under the lock for the allocation that contains ptr; false when none does.
  template <class Fn>
  bool with_containing(const void* ptr, Fn&& fn);

 private:
  std::mutex mutex_;
  std::map<std::uintptr_t, HostAllocation*> by_base_;
};

/// One shared mapping of an allocation's memfd. Usually the allocation is its only owner; keep_mapping() hands out
/// more, so that memory a NIC-style registration covers stays mapped at its address until the registration is gone.
struct Mapping {
  void* data = nullptr;
  std::size_t bytes = 0;
  Mapping(void* d, std::size_t b) : data(d), bytes(b) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { ::munmap(data, bytes); }
};

class HostAllocation final : public Allocation {
 public:
  explicit HostAllocation(std::size_t bytes) {
    static std::atomic<std::uint64_t> counter{1};
    id_ = make_allocation_id(counter.fetch_add(1, std::memory_order_relaxed));
    std::string name = cat("pickle:", bytes);
    fd_.reset(::memfd_create(name.c_str(), MFD_CLOEXEC));
    if (!fd_) throw SystemError(describe({.op = "allocate host memory: memfd_create", .bytes = bytes}), errno);
    if (::ftruncate(fd_.get(), static_cast<off_t>(bytes)) != 0) {
      throw SystemError(describe({.op = "allocate host memory: ftruncate", .bytes = bytes}), errno);
    }
    mapping_ = std::make_shared<Mapping>(map_shared(fd_.get(), bytes, "allocate host memory"), bytes);
    Registry::instance().add(reinterpret_cast<std::uintptr_t>(mapping_->data), this);
  }
  // Unmapped when the last owner of the mapping lets go: usually now, later when keep_mapping() handed it out.
  ~HostAllocation() override { Registry::instance().remove(reinterpret_cast<std::uintptr_t>(mapping_->data)); }

  void* data() const noexcept override { return mapping_->data; }
  std::size_t bytes() const noexcept override { return mapping_->bytes; }
  MemoryKind kind() const noexcept override { return MemoryKind::Host; }
  int device() const noexcept override { return -1; }
  AllocMethod method() const noexcept override { return AllocMethod::Default; }
  std::uint64_t id() const noexcept override { return id_; }
  int fd() const noexcept { return fd_.get(); }
  std::shared_ptr<const void> keep_mapping() const { return std::shared_ptr<const void>(mapping_, mapping_->data); }

 private:
  UniqueFd fd_;
  std::shared_ptr<Mapping> mapping_;  // address and size live here, shared with keep_mapping()'s handles
  std::uint64_t id_ = 0;
};

template <class Fn>
bool Registry::with_containing(const void* ptr, Fn&& fn) {
  auto address = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mutex_);
  auto it = by_base_.upper_bound(address);
  if (it == by_base_.begin()) return false;
  --it;
  if (address - it->first >= it->second->bytes()) return false;
  fn(*it->second);
  return true;
}

class HostImport final : public ImportedMemory {
 public:
  HostImport(const MemoryDescriptor& descriptor, UniqueFd fd) : descriptor_(descriptor) {
    std::string op = cat("import host memory of process ", descriptor.pid);
    if (!fd) throw InvalidArgument(describe({.op = op, .bytes = descriptor.bytes}) + ": no memfd came with it");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw SystemError(describe({.op = op, .bytes = descriptor.bytes}) + ": fstat", errno);
    // A short memfd would turn accesses past its end into SIGBUS: refuse it here instead.
    if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) < descriptor.bytes) {
      throw ProtocolError(describe({.op = op, .bytes = descriptor.bytes}) + cat(": the fd holds only ", st.st_size,
                                                                               " bytes"));
    }
    data_ = map_shared(fd.get(), descriptor.bytes, op);
    // The mapping keeps the memory alive; the fd is no longer needed and closes here.
  }
  ~HostImport() override { ::munmap(data_, descriptor_.bytes); }

  void* data() const noexcept override { return data_; }
  std::size_t bytes() const noexcept override { return descriptor_.bytes; }
  const MemoryDescriptor& descriptor() const noexcept override { return descriptor_; }

 private:
  MemoryDescriptor descriptor_;
  void* data_ = nullptr;
};

}  // namespace

std::unique_ptr<Allocation> allocate(std::size_t bytes) { return std::make_unique<HostAllocation>(bytes); }

std::optional<AllocationInfo> find_allocation(const void* ptr) {
  std::optional<AllocationInfo> info;
  Registry::instance().with_containing(ptr, [&](const HostAllocation& allocation) {
    info = AllocationInfo{.base = allocation.data(),
                          .bytes = allocation.bytes(),
                          .kind = MemoryKind::Host,
                          .device = -1,
                          .id = allocation.id(),
                          .method = AllocMethod::Default,
                          .offset = static_cast<std::size_t>(static_cast<const std::byte*>(ptr) -
                                                             static_cast<const std::byte*>(allocation.data()))};
  });
  return info;
}

std::shared_ptr<const void> keep_mapping(const void* ptr) {
  std::shared_ptr<const void> kept;
  Registry::instance().with_containing(ptr, [&](const HostAllocation& allocation) { kept = allocation.keep_mapping(); });
  return kept;
}

ExportedMemory export_memory(const AllocationInfo& info) {
  ExportedMemory out;
  out.offset = info.offset;
  out.descriptor = MemoryDescriptor{.kind = MemoryKind::Host,
                                    .method = AllocMethod::Default,
                                    .device = -1,
                                    .pid = static_cast<std::uint32_t>(getpid()),
                                    .bytes = info.bytes,
                                    .id = info.id,
                                    .base = reinterpret_cast<std::uint64_t>(info.base)};
  int dup_errno = 0;
  // Duplicate under the registry lock: the allocation cannot be freed (and its fd closed) meanwhile.
  bool found = Registry::instance().with_containing(info.base, [&](const HostAllocation& allocation) {
    if (allocation.id() != info.id) return;
    out.fd.reset(::fcntl(allocation.fd(), F_DUPFD_CLOEXEC, 0));
    if (!out.fd) dup_errno = errno;
  });
  if (!found || (!out.fd && dup_errno == 0)) {
    throw InvalidArgument(describe({.op = cat("export host memory at ", info.base), .bytes = info.bytes}) +
                          ": the allocation was freed");
  }
  if (!out.fd) throw SystemError(describe({.op = "export host memory: dup", .bytes = info.bytes}), dup_errno);
  return out;
}

std::unique_ptr<ImportedMemory> import_memory(const MemoryDescriptor& descriptor, UniqueFd fd) {
  return std::make_unique<HostImport>(descriptor, std::move(fd));
}

}  // namespace pickle::device::host
