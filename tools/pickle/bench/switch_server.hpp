#pragma once
// pickle's software switch (seed 002): SwitchML's aggregation done by a thread on a host instead of a programmable
// switch, over UDP (switch_protocol.hpp says how). One per job; the workers send their chunks to it.

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/unique_fd.hpp"

namespace pickle::bench::switchml {

class SoftwareSwitch {
 public:
  struct Options {
    int workers = 2;
    int slots = 256;  ///< SwitchML's max_outstanding_packets (the seed's 256)
    /// Test hook PICKLE_TEST_SWITCH_DROP: every n-th datagram received and every n-th sent is dropped (0: none).
    int drop_every = 0;
  };
  struct Counters {
    std::uint64_t received = 0;    ///< datagrams read (dropped ones included)
    std::uint64_t sent = 0;        ///< sums sent (one per worker per finished chunk, answers to resends included)
    std::uint64_t dropped = 0;     ///< by the test hook
    std::uint64_t duplicates = 0;  ///< contributions counted already, or for a finished chunk (answered again)
    std::uint64_t stale = 0;       ///< for a round two or more behind the slot's (ignored)
    std::uint64_t malformed = 0;   ///< not this protocol, or out of range
  };

  /// Binds a UDP port on every interface (IPv6 and IPv4 where the host has both) and starts serving.
  /// SystemError when no socket can be made.
  explicit SoftwareSwitch(const Options& options);
  ~SoftwareSwitch();
  SoftwareSwitch(const SoftwareSwitch&) = delete;
  SoftwareSwitch& operator=(const SoftwareSwitch&) = delete;

  int port() const noexcept { return port_; }
  /// The socket's receive buffer as the kernel granted it (Linux caps the 16 MiB asked at net.core.rmem_max): a burst
  /// of every slot's packets beyond it is lost and resent after a while.
  int receive_buffer_bytes() const;
  Counters counters() const;

 private:
  /// One generation of a slot: the sum so far of round `round`.
  struct Aggregate {
    std::int64_t round = -1;  // -1: never used
    std::uint32_t offset = 0;
    std::uint16_t numel = 0;
    std::uint64_t arrived = 0;  // bit w: worker w's contribution is in
    bool done = false;
    std::vector<std::uint32_t> sum;  // unsigned: overflow wraps, as int32 sums do in two's complement
  };

  void serve();
  void handle(const unsigned char* datagram, std::size_t bytes, const sockaddr_storage& from, socklen_t from_length);
  /// Writes the sum datagram of `aggregate` (slot `slot`) into sum_datagram_; returns its length.
  std::size_t pack_sum(const Aggregate& aggregate, std::uint32_t slot);
  /// Sends the first `bytes` of sum_datagram_ to `worker` (unless the test hook drops it).
  void send_sum(std::size_t bytes, int worker);
  bool drop_now(std::uint64_t& counter);

  Options options_;
  UniqueFd fd_;
  int port_ = 0;
  std::uint64_t all_workers_;          // the `arrived` mask of a finished aggregate
  std::vector<Aggregate> aggregates_;  // slot s, generation g at 2 s + g
  std::vector<unsigned char> sum_datagram_;
  struct Address {
    sockaddr_storage address{};
    socklen_t length = 0;  // 0: not heard from yet
  };
  std::vector<Address> workers_;  // where each worker's last datagram came from
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> received_{0}, sent_{0}, dropped_{0}, duplicates_{0}, stale_{0}, malformed_{0};
  std::uint64_t receive_drop_count_ = 0, send_drop_count_ = 0;  // the serving thread's alone
  std::thread thread_;
};

}  // namespace pickle::bench::switchml
