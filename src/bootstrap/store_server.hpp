#pragma once
// Rank 0's store server: one background thread that polls the listening socket and every connection (no thread per
// client), feeds complete frames to a StoreState and writes back its answers. A connection that sends a malformed,
// oversized or unauthenticated frame is answered with an error and dropped; the others are not disturbed.

#include <memory>
#include <string>

#include "core/clock.hpp"

namespace pickle::bootstrap {

class StoreServer {
 public:
  /// Listens on host:port (port 0: any free port) before returning, so that a taken port fails here, then serves
  /// in a background thread. A connection that has not sent a valid Hello within timeout_seconds is dropped.
  /// `other_hosts_connect`: ranks of other hosts take part, so a host name that resolves to loopback here listens
  /// on every interface instead (listen_tcp).
  StoreServer(const std::string& host, int port, int world_size, std::string token, double timeout_seconds,
              bool other_hosts_connect = false);
  /// Stops serving at once (pending answers already queued are sent on a best-effort basis).
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The port actually listened on.
  int port() const;
  /// Keeps serving until no rank is connected any more or the deadline passes, then stops.
  void finish(const Deadline& deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pickle::bootstrap
