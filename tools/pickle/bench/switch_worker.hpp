#pragma once
// A worker of pickle's software switch (seed 002): sums an int32 tensor with the other workers' through the switch
// (switch_protocol.hpp), with SwitchML's window of one chunk per slot and its resends.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/unique_fd.hpp"

namespace pickle::bench::switchml {

class SwitchWorker {
 public:
  struct Options {
    int worker = 0;   ///< this worker's index, 0 .. workers - 1
    int slots = 256;  ///< as the switch's
    int numel = 64;   ///< int32 elements per packet (SwitchML's packet_numel; the seed's 64)
    /// How long a chunk waits for its sum before it is sent again.
    double resend_after_s = 0.02;
  };

  /// A UDP socket for the switch at host:port (the first IPv4 address of `host`, else its first IPv6 one). Not
  /// connected: the switch answers from the address its host routes by, which need not be `host`'s (a name that
  /// resolves to 127.0.1.1, an alias, another interface), and a connected socket would drop those answers.
  /// InvalidArgument when `host` does not resolve or the options are out of range, SystemError when no socket can be
  /// made.
  SwitchWorker(const std::string& host, int port, const Options& options);

  /// Replaces data[0, count) by its element-wise sum over every worker (each must call it with the same count).
  /// TimeoutError naming `what` when no sum has come back for `timeout_s` while some are missing (the switch or a
  /// worker is gone): a long tensor that keeps coming back is not cut off.
  void allreduce(std::int32_t* data, std::size_t count, double timeout_s, const std::string& what);

  /// Chunks sent again because their sum did not come back in time, over every call so far.
  std::uint64_t resends() const noexcept { return resends_; }

 private:
  Options options_;
  UniqueFd fd_;
  sockaddr_storage switch_{};
  socklen_t switch_length_ = 0;
  std::string switch_address_;
  std::vector<std::uint32_t> rounds_;  // per slot: how many times this worker has used it
  std::uint64_t resends_ = 0;
};

}  // namespace pickle::bench::switchml
