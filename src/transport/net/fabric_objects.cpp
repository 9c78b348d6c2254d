#include "transport/net/fabric_objects.hpp"

#include <rdma/fi_errno.h>

#include <pickle/error.hpp>

#include "transport/net/fabric_error.hpp"

namespace pickle::transport::net {

InfoPtr duplicate_info(const fi_info& info) {
  fi_info* copy = fi_dupinfo(&info);
  if (copy == nullptr) throw SystemError("fi_dupinfo failed", ENOMEM);
  if (copy->next != nullptr) {
    fi_freeinfo(copy->next);
    copy->next = nullptr;
  }
  return InfoPtr(copy);
}

Fabric open_fabric(const fi_info& info, const OpContext& where) {
  fid_fabric* fabric = nullptr;
  check_fabric(fi_fabric(info.fabric_attr, &fabric, nullptr), where, "fi_fabric");
  return Fabric(fabric);
}

Domain open_domain(fid_fabric* fabric, fi_info& info, const OpContext& where) {
  fid_domain* domain = nullptr;
  check_fabric(fi_domain(fabric, &info, &domain, nullptr), where, "fi_domain");
  return Domain(domain);
}

AddressVector open_address_vector(fid_domain* domain, std::size_t count, const OpContext& where) {
  fi_av_attr attr{};
  attr.type = FI_AV_UNSPEC;
  attr.count = count;
  fid_av* av = nullptr;
  check_fabric(fi_av_open(domain, &attr, &av, nullptr), where, "fi_av_open");
  return AddressVector(av);
}

CompletionQueue open_completion_queue(fid_domain* domain, std::size_t size, bool want_fd, int* fd,
                                      const OpContext& where) {
  *fd = -1;
  fi_cq_attr attr{};
  attr.size = size;
  attr.format = FI_CQ_FORMAT_DATA;
  fid_cq* cq = nullptr;
  if (want_fd) {
    attr.wait_obj = FI_WAIT_FD;
    if (fi_cq_open(domain, &attr, &cq, nullptr) == 0) {
      CompletionQueue owner(cq);
      int wait_fd = -1;
      if (fi_control(&cq->fid, FI_GETWAIT, &wait_fd) == 0 && wait_fd >= 0) {
        *fd = wait_fd;  // owned by the queue: closed with it
        return owner;
      }
    }
  }
  attr.wait_obj = FI_WAIT_NONE;
  check_fabric(fi_cq_open(domain, &attr, &cq, nullptr), where, "fi_cq_open");
  return CompletionQueue(cq);
}

Endpoint open_endpoint(fid_domain* domain, fi_info& info, fid_av* av, fid_cq* cq, const OpContext& where) {
  fid_ep* raw = nullptr;
  check_fabric(fi_endpoint(domain, &info, &raw, nullptr), where, "fi_endpoint");
  Endpoint endpoint(raw);
  check_fabric(fi_ep_bind(raw, &av->fid, 0), where, "fi_ep_bind(av)");
  check_fabric(fi_ep_bind(raw, &cq->fid, FI_TRANSMIT | FI_RECV), where, "fi_ep_bind(cq)");
  check_fabric(fi_enable(raw), where, "fi_enable");
  return endpoint;
}

std::vector<std::byte> endpoint_name(fid_ep* endpoint, const OpContext& where) {
  std::vector<std::byte> name(64);
  std::size_t length = name.size();
  int rc = fi_getname(&endpoint->fid, name.data(), &length);
  if (rc == -FI_ETOOSMALL) {
    name.resize(length);
    rc = fi_getname(&endpoint->fid, name.data(), &length);
  }
  check_fabric(rc, where, "fi_getname");
  name.resize(length);
  return name;
}

MemoryRegion register_memory(fid_domain* domain, void* buffer, std::size_t bytes, std::uint64_t access,
                             std::uint64_t requested_key, const OpContext& where) {
  fid_mr* mr = nullptr;
  check_fabric(fi_mr_reg(domain, buffer, bytes, access, 0, requested_key, 0, &mr, nullptr), where, "fi_mr_reg");
  return MemoryRegion(mr);
}

}  // namespace pickle::transport::net
