#include <pickle/error.hpp>

#include <cstring>

namespace pickle {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::System: return "System";
    case ErrorCode::Cuda: return "Cuda";
    case ErrorCode::Peer: return "Peer";
    case ErrorCode::Timeout: return "Timeout";
    case ErrorCode::Unavailable: return "Unavailable";
    case ErrorCode::Protocol: return "Protocol";
    case ErrorCode::Nccl: return "Nccl";
    case ErrorCode::Internal: return "Internal";
  }
  return "Unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(std::string("pickle ") + error_code_name(code) + " error: " + message),
      code_(code),
      head_length_(std::string_view(what()).size() - message.size()) {}

SystemError::SystemError(const std::string& message, int errno_value)
    : Error(ErrorCode::System, message + ": " + std::strerror(errno_value)), errno_(errno_value) {}

}  // namespace pickle
