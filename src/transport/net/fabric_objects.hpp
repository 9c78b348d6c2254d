#pragma once
// RAII owners of libfabric objects: every fid the net transport opens lives in a FidOwner, which fi_close()s it,
// so that no error path leaks a fabric, domain, endpoint, queue, address vector or registration. The open_*
// functions wrap the fi_* calls and turn failures into pickle errors naming rank, peer and operation.

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/format.hpp"

namespace pickle::transport::net {

/// Move-only owner of one libfabric object (any struct with a `fid` member); fi_close()s it on destruction.
template <class T>
class FidOwner {
 public:
  FidOwner() = default;
  explicit FidOwner(T* object) noexcept : object_(object) {}
  FidOwner(FidOwner&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  FidOwner& operator=(FidOwner&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }
  FidOwner(const FidOwner&) = delete;
  FidOwner& operator=(const FidOwner&) = delete;
  ~FidOwner() { reset(); }

  T* get() const noexcept { return object_; }
  T* operator->() const noexcept { return object_; }
  explicit operator bool() const noexcept { return object_ != nullptr; }
  /// Closes the object now (an endpoint closed this way stops touching the buffers of its pending operations).
  void reset() noexcept {
    // fi_close can only fail for objects still in use by others (a queue bound to an open endpoint); owners are
    // declared so that users close first, so there is nothing useful to do with an error here.
    if (object_ != nullptr) (void)fi_close(&std::exchange(object_, nullptr)->fid);
  }

 private:
  T* object_ = nullptr;
};

using Fabric = FidOwner<fid_fabric>;
using Domain = FidOwner<fid_domain>;
using Endpoint = FidOwner<fid_ep>;
using CompletionQueue = FidOwner<fid_cq>;
using AddressVector = FidOwner<fid_av>;
using MemoryRegion = FidOwner<fid_mr>;

/// Owner of an fi_info list (from fi_getinfo or fi_dupinfo).
struct InfoDeleter {
  void operator()(fi_info* info) const noexcept { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// A copy of one entry of an fi_info list (its `next` cleared).
InfoPtr duplicate_info(const fi_info& info);

Fabric open_fabric(const fi_info& info, const OpContext& where);
Domain open_domain(fid_fabric* fabric, fi_info& info, const OpContext& where);
/// An address vector for `count` addresses.
AddressVector open_address_vector(fid_domain* domain, std::size_t count, const OpContext& where);

/// A completion queue of `size` entries in FI_CQ_FORMAT_DATA. With `want_fd`, it first asks for a file descriptor
/// wait object (so that the progress thread can sleep in poll() instead of spinning); providers without one (efa)
/// get a queue without a wait object and `*fd` stays -1.
CompletionQueue open_completion_queue(fid_domain* domain, std::size_t size, bool want_fd, int* fd,
                                      const OpContext& where);

/// An enabled RDM endpoint bound to `av` and to `cq` for both its transmit and receive completions.
Endpoint open_endpoint(fid_domain* domain, fi_info& info, fid_av* av, fid_cq* cq, const OpContext& where);

/// The endpoint's address as the provider names it (what a peer inserts into its address vector).
std::vector<std::byte> endpoint_name(fid_ep* endpoint, const OpContext& where);

/// Registers [buffer, buffer + bytes) for `access` (FI_WRITE, FI_REMOTE_WRITE...). `requested_key` is used by
/// providers that let the application choose keys (no FI_MR_PROV_KEY): it must be unique within the domain.
MemoryRegion register_memory(fid_domain* domain, void* buffer, std::size_t bytes, std::uint64_t access,
                             std::uint64_t requested_key, const OpContext& where);

}  // namespace pickle::transport::net
