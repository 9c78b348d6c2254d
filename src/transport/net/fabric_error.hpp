#pragma once
// libfabric's return codes as pickle errors. Every fi_* call of the net transport goes through here, so that a
// failure names the rank, peer, operation and size (core/format.hpp's describe) and carries fi_strerror's text.

#include <string>
#include <string_view>

#include "core/format.hpp"

namespace pickle::transport::net {

/// The pickle::Error for a failed libfabric call: `call` is the function ("fi_writedata"), `rc` its (negative)
/// return code. -FI_ENODATA / -FI_ENOSYS / -FI_EOPNOTSUPP become UnavailableError, -FI_ETIMEDOUT TimeoutError, a
/// broken connection (-FI_ECONNRESET, -FI_ECONNREFUSED, -FI_ENOTCONN, -FI_EIO...) PeerError, others SystemError.
[[noreturn]] void throw_fabric_error(const OpContext& where, std::string_view call, int rc);

/// Throws throw_fabric_error when `rc` is negative; returns `rc` otherwise.
inline long check_fabric(long rc, const OpContext& where, std::string_view call) {
  if (rc < 0) throw_fabric_error(where, call, static_cast<int>(rc));
  return rc;
}

/// "Connection reset by peer (-104)": fi_strerror's text and the code, for messages.
std::string fabric_error_text(int rc);

}  // namespace pickle::transport::net
