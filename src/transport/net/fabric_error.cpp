#include "transport/net/fabric_error.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <pickle/error.hpp>

namespace pickle::transport::net {

std::string fabric_error_text(int rc) { return cat(fi_strerror(rc < 0 ? -rc : rc), " (", rc, ")"); }

void throw_fabric_error(const OpContext& where, std::string_view call, int rc) {
  const std::string message = cat(describe(where), ": ", call, " failed: ", fabric_error_text(rc));
  const int code = rc < 0 ? -rc : rc;
  switch (code) {
    case FI_ENODATA:
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
      throw UnavailableError(message);
    case FI_ETIMEDOUT:
      throw TimeoutError(message);
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ESHUTDOWN:
    case FI_EIO:
      throw PeerError(message, where.peer);
    default:
      // Codes below FI_ERRNO_OFFSET are errno values: SystemError keeps the errno (and appends strerror's text, which
      // is fi_strerror's too). Above it are libfabric's own codes (FI_ETRUNC, FI_EAVAIL...), which errno cannot name.
      if (code < FI_ERRNO_OFFSET) {
        throw SystemError(cat(describe(where), ": ", call, " failed (", rc, ")"), code);
      }
      throw Error(ErrorCode::System, message);
  }
}

}  // namespace pickle::transport::net
