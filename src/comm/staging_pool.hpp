#pragma once
// Pinned host buffers that GPU data is staged through on its way over the net transport, which registers host memory
// only (docs/rdma.md, "GPU memory"): a send copies its source into one (copy engine, device to host) and writes from
// it; a recv exposes one to the sender and copies it into the destination (host to device) once every chunk landed.
//
// Buffers come in power-of-two sizes and go back to the pool when their last reference drops. Each is a pickle host
// allocation, registered with CUDA for the communicator's streams (so the copies are asynchronous copy-engine work)
// and, once used, with the net transport (cached per allocation, so a reused buffer registers nothing).

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <pickle/memory.hpp>

#include "device/host_registration.hpp"
#include "device/memory.hpp"

namespace pickle::comm {

class StagingPool {
 public:
  /// Buffers usable by streams of `streams_kind` on `device`.
  StagingPool(MemoryKind streams_kind, int device);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  /// A buffer of at least `bytes` bytes (at least 1): back to the pool when the last copy of the pointer is dropped.
  std::shared_ptr<std::byte> take(std::size_t bytes);
  /// Frees the buffers returned to a full pool (cudaHostUnregister). Their deleter cannot: it may run in a CUDA host
  /// callback. Nor does take(): a send takes its buffer under the communicator's lock, and a CUDA call that may wait
  /// for the device must not run there (a host callback on a stream may be waiting for that lock). Called from the
  /// application's threads, outside every lock of the communicator.
  void free_surplus();
  /// Buffers allocated so far, and the bytes they hold (for tests and stats).
  std::size_t buffers() const;
  std::size_t bytes() const;

 private:
  struct Buffer {
    std::unique_ptr<device::Allocation> memory;
    std::unique_ptr<device::HostRegistration> registration;
  };
  struct State {
    std::mutex mutex;
    std::map<std::size_t, std::vector<std::unique_ptr<Buffer>>> free;  // by size
    std::vector<std::unique_ptr<Buffer>> surplus;  // returned to a full pool: freed by free_surplus()
    std::size_t buffers = 0, bytes = 0;
  };

  MemoryKind streams_kind_;
  int device_;
  std::shared_ptr<State> state_;  // buffers in use hold it weakly: one returned after the pool is gone is freed
};

}  // namespace pickle::comm
