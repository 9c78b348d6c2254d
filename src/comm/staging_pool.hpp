#pragma once
// Pinned host buffers that GPU data is staged through on its way over the net transport, which registers host memory
// only (docs/rdma.md, "GPU memory"): a send copies its source into one (copy engine, device to host) and writes from
// it; a recv exposes one to the sender and copies it into the destination (host to device) once every chunk landed.
//
// Buffers come in power-of-two sizes and go back to the pool when their last reference drops. Each is a pickle host
// allocation, registered with CUDA for the communicator's streams (so the copies are asynchronous copy-engine work)
// and, once used, with the net transport (cached per allocation, so a reused buffer registers nothing).
//
// The pool keeps every buffer it made until it is destroyed (with the communicator), as PyTorch's pinned-memory
// caching allocator does: it holds the most that was ever in use at once. Freeing one earlier would call
// cudaHostUnregister, which waits until every stream of the device is idle (measured on an H100, CUDA 13.0): a
// stream held on a peer's signal, or on a benchmark's gate, then never lets it return, and the thread that would
// have released it is the one waiting. `pickle bench p2p` over net on GPU memory hung that way at its second repeat
// (docs/results/2026-11-25c-h100x1.md).

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

  /// A buffer of at least `bytes` bytes (at least 1): back to the pool when the last copy of the pointer is dropped
  /// (which may happen in a CUDA host callback: it calls no CUDA). A new buffer registers with CUDA
  /// (cudaHostRegister, which does not wait for the device).
  std::shared_ptr<std::byte> take(std::size_t bytes);
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
    std::size_t buffers = 0, bytes = 0;
  };

  MemoryKind streams_kind_;
  int device_;
  std::shared_ptr<State> state_;  // buffers in use hold it weakly: one returned after the pool is gone is freed
};

}  // namespace pickle::comm
