#include "core/error_text.hpp"

#include "core/format.hpp"

namespace pickle {

std::string without_head(const char* what) {
  std::string text = what;
  if (auto head = text.find(" error: "); text.rfind("pickle ", 0) == 0 && head != std::string::npos) {
    text.erase(0, head + 8);
  }
  return text;
}

[[noreturn]] void rethrow_with_prefix(const Error& error, const std::string& prefix) {
  std::string message = error.message();
  if (message.rfind(prefix, 0) != 0) message = cat(prefix, ": ", message);  // not twice
  if (const auto* peer = dynamic_cast<const PeerError*>(&error)) throw PeerError(message, peer->peer());
  if (const auto* cuda = dynamic_cast<const CudaError*>(&error)) throw CudaError(message, cuda->cuda_code());
  switch (error.code()) {
    case ErrorCode::InvalidArgument: throw InvalidArgument(message);
    case ErrorCode::Timeout: throw TimeoutError(message);
    case ErrorCode::Unavailable: throw UnavailableError(message);
    case ErrorCode::Protocol: throw ProtocolError(message);
    default: throw Error(error.code(), message);
  }
}

}  // namespace pickle
