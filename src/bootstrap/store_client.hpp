#pragma once
// One connection of a rank to the store: connect (retrying until the timeout), Hello + rendezvous (or Attach, for a
// further connection of a rank that joined), then one request at a time with its answer. Every wait is bounded;
// errors name this rank, the operation and the store's address.

#include <cstdint>
#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>

#include "bootstrap/frame.hpp"
#include "bootstrap/messages.hpp"
#include "bootstrap/socket.hpp"

namespace pickle::bootstrap {

class StoreClient {
 public:
  enum class Role {
    Join,    ///< the rank's first connection: Hello, returns once every rank has joined; its loss is the rank's
    Attach,  ///< a further connection of a rank that joined (concurrent calls from threads): returns at once
  };
  /// Connects to self.master_addr:master_port and says Hello or Attach (see Role).
  StoreClient(const RankInfo& self, const std::string& token, double timeout_seconds, Role role = Role::Join);
  /// Says Bye (best effort) and closes.
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  /// Sends a request and returns its answer. An ErrorResponse is thrown as the matching pickle::Error, its message
  /// prefixed by `what` (e.g. "rank 1: store get 'x'"). wait_ms is how long the server may park the request; the
  /// client waits that long plus a grace period for the answer before it gives up on rank 0.
  Response call(const Request& request, const std::string& what);

  /// How long the server may park a request, in ms (the store's timeout).
  std::uint32_t wait_ms() const { return wait_ms_; }
  /// "127.0.0.1:29500"
  const std::string& address() const { return address_; }
  /// A send or receive failed half-way: this connection refuses further calls.
  bool broken() const { return broken_; }

 private:
  Response exchange(const Request& request, const std::string& what, std::uint32_t wait_ms);
  [[noreturn]] void throw_remote(const ErrorResponse& error, const std::string& what, bool hello);

  RankInfo self_;
  std::string address_;
  double timeout_seconds_;
  std::uint32_t wait_ms_;
  UniqueFd fd_;
  FrameParser parser_;
  std::vector<std::byte> recv_buffer_;
  bool broken_ = false;  // a send or receive failed half-way: the stream is out of step, refuse further calls
};

}  // namespace pickle::bootstrap
