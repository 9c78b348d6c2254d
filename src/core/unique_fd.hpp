#pragma once
// A file descriptor with one owner. Every fd pickle opens (sockets, memfds, exported CUDA handles) lives in one of
// these, so that no error path leaks a descriptor.

#include <unistd.h>

#include <utility>

namespace pickle {

/// Move-only owner of a POSIX file descriptor; closes it on destruction. -1 means "none".
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  /// The descriptor, still owned by this object.
  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  /// Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }

  /// Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1) noexcept {
    int old = std::exchange(fd_, fd);
    // close() may fail with EINTR; on Linux the descriptor is released anyway, so retrying would be wrong.
    if (old >= 0) ::close(old);
  }

 private:
  int fd_ = -1;
};

}  // namespace pickle
