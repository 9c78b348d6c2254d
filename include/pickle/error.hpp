#pragma once
/// pickle's errors: every failure reaches the caller as a pickle::Error carrying a code, thrown at the API
/// boundary with the rank, peer, operation and size in its message.

#include <stdexcept>
#include <string>

namespace pickle {

/// What kind of failure an Error reports. Stable numbers: they may be logged and compared across versions.
enum class ErrorCode : int {
  InvalidArgument = 1,  ///< the caller passed something wrong (size, peer, buffer, option)
  System = 2,           ///< an operating-system call failed (errno kept in SystemError)
  Cuda = 3,             ///< the CUDA runtime or driver returned an error
  Peer = 4,             ///< a peer process died, closed its connection or broke the protocol
  Timeout = 5,          ///< something did not happen within PICKLE_TIMEOUT
  Unavailable = 6,      ///< a GPU, driver, NCCL or libfabric that the request needs is not present
  Protocol = 7,         ///< a malformed, truncated, oversized or unauthenticated message
  Nccl = 8,             ///< NCCL returned an error
  Internal = 9,         ///< a broken invariant inside pickle (a bug: please report it)
};

/// The name of a code, e.g. "Timeout".
const char* error_code_name(ErrorCode code) noexcept;

/// Base of every exception pickle throws.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }
  /// What went wrong, without what()'s head ("pickle <Code> error: "): for a caller that says it in its own words.
  std::string message() const { return std::string(what() + head_length_); }

 private:
  // The head's length rather than a second string: copying an exception must not throw (std::runtime_error shares
  // its text), and what() already holds the message.
  ErrorCode code_;
  std::size_t head_length_;
};

class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& message) : Error(ErrorCode::InvalidArgument, message) {}
};

/// An operating-system call failed; errno_value() is the errno it left.
class SystemError : public Error {
 public:
  SystemError(const std::string& message, int errno_value);
  int errno_value() const noexcept { return errno_; }

 private:
  int errno_;
};

/// A CUDA runtime (cudaError_t) or driver (CUresult) call failed; cuda_code() is that value.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, int cuda_code)
      : Error(ErrorCode::Cuda, message), cuda_code_(cuda_code) {}
  int cuda_code() const noexcept { return cuda_code_; }

 private:
  int cuda_code_;
};

/// A peer died, hung up or misbehaved; peer() is its rank (-1 when unknown).
class PeerError : public Error {
 public:
  PeerError(const std::string& message, int peer) : Error(ErrorCode::Peer, message), peer_(peer) {}
  int peer() const noexcept { return peer_; }

 private:
  int peer_;
};

class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& message) : Error(ErrorCode::Timeout, message) {}
};

/// Hardware or a library the request needs is absent (no GPU, no driver, no NCCL, no libfabric).
class UnavailableError : public Error {
 public:
  explicit UnavailableError(const std::string& message) : Error(ErrorCode::Unavailable, message) {}
};

/// A message on the wire was malformed, truncated, oversized or carried the wrong token.
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& message) : Error(ErrorCode::Protocol, message) {}
};

}  // namespace pickle
