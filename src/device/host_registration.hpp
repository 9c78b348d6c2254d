#pragma once
// Host memory that a GPU can read and write: cudaHostRegister (portable, mapped) on CUDA. pickle keeps its
// completion and signal words in shared host memory registered this way, so that a peer's copy engine can bump
// them with a stream write-value, a stream can wait on them, and the host reads them with a plain atomic load
// (no device round trip to learn that a recv finished).

#include <cstddef>
#include <memory>

#include <pickle/memory.hpp>

namespace pickle::device {

/// A registration of [ptr, ptr + bytes); unregistered on destruction.
class HostRegistration {
 public:
  virtual ~HostRegistration() = default;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  /// The address that streams of `kind` use for the host address `host_ptr` inside the registration.
  virtual void* device_address(void* host_ptr) const noexcept = 0;

 protected:
  HostRegistration() = default;
};

/// For Host streams this registers nothing (the address is used as it is); for Cuda it pins and maps the range for
/// every device (page-aligned ranges, e.g. from allocate(Host), are required by CUDA's mapped registration).
std::unique_ptr<HostRegistration> register_host_memory(MemoryKind streams_kind, void* ptr, std::size_t bytes,
                                                       int device);

}  // namespace pickle::device
