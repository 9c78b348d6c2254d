#include "device/host_registration.hpp"

#include "device/backends.hpp"

namespace pickle::device {
namespace {

/// Host streams address host memory directly.
class IdentityRegistration final : public HostRegistration {
 public:
  void* device_address(void* host_ptr) const noexcept override { return host_ptr; }
};

}  // namespace

std::unique_ptr<HostRegistration> register_host_memory(MemoryKind streams_kind, void* ptr, std::size_t bytes,
                                                       int device) {
  if (streams_kind == MemoryKind::Host) return std::make_unique<IdentityRegistration>();
  return cuda::register_host_memory(ptr, bytes, device);
}

}  // namespace pickle::device
