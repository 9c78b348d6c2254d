#pragma once
// Peer allocations mapped into this process, one mapping per (peer, allocation id). Mapping costs 1-10 ms on H200
// whichever handle carries it (reference/h200x2-anchors.md); the cache makes it a one-time cost per allocation, so
// that a buffer inside a larger allocation (PyTorch's caching allocator) and every later transfer to it open
// nothing. Ids are unique per allocation, so memory freed and allocated again at the same address gets a new id
// and can never hit a stale mapping. A mapping goes when its owner says the allocation is gone (ReleaseMessage):
// a mapping holds the peer's memory, which would otherwise stay allocated until the communicator is destroyed.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/serial_worker.hpp"
#include "core/unique_fd.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"

namespace pickle::transport::ipc {

class MappingCache {
 public:
  explicit MappingCache(int local_device) : local_device_(local_device) {}

  /// Maps an allocation that `peer` announced (counted as an open). An allocation already mapped is kept.
  void insert(int peer, const device::MemoryDescriptor& descriptor, UniqueFd fd);
  /// The mapping of `peer`'s allocation `id`, or nullptr when it was never announced. Counts a hit when found.
  device::ImportedMemory* find(int peer, std::uint64_t id);
  /// Whether `peer`'s allocation `id` is mapped; not counted as a hit (no transfer uses it).
  bool contains(int peer, std::uint64_t id) const;
  /// Unmaps `peer`'s allocation `id` (counted as a close, at once); nothing when it is not mapped. The caller
  /// guarantees that no copy into it is queued or still running: the owner releases an allocation only once every
  /// receive into it completed, and a receive completes after its copy did. A VMM mapping is unmapped on a thread of
  /// the cache's own, not the caller's (the progress thread): the unmap first waits until every stream of the device
  /// is idle (docs/device.md), and a stream held on a peer's signal would hold the caller, which the peer may need to
  /// go on. A cudaMalloc allocation's handle (cudaIpcCloseMemHandle, which waits likewise) is still closed here: the
  /// exporter's next allocation may come with the same handle, which opens only once per process (known gap).
  void release(int peer, std::uint64_t id);

  std::uint64_t opens() const;
  std::uint64_t closes() const;
  std::uint64_t hits() const;

 private:
  int local_device_;
  mutable std::mutex mutex_;
  std::map<std::pair<int, std::uint64_t>, std::unique_ptr<device::ImportedMemory>> mappings_;
  std::uint64_t opens_ = 0;
  std::uint64_t closes_ = 0;
  std::uint64_t hits_ = 0;
  /// Closes released mappings, made at the first release (under mutex_). Declared last: destroyed first, so that a
  /// close it has not run yet happens in its destructor (a dropped job still destroys the mapping it holds).
  std::unique_ptr<SerialWorker> closer_;
};

}  // namespace pickle::transport::ipc
