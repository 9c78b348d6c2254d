#pragma once
// What the net transport is asked to use: provider, interface, lanes, chunk size, writes in flight per lane.

#include <cstddef>
#include <string>

namespace pickle::transport::net {

/// Settings of one NetTransport. Every rank of a job should use the same provider and lane count (checked when the
/// endpoints are exchanged); the chunk size may differ, since each sender's own chunk size decides its messages.
struct NetOptions {
  std::string provider = "tcp";  ///< fi_getinfo's provider name ("tcp", "verbs", "efa", "tcp;ofi_rxm")
  std::string iface;             ///< interface / domain name ("lo", "mlx5_0"); empty: the provider's first choice
  int lanes = 4;                 ///< endpoints per peer (1..kMaxLanes)
  std::size_t chunk = 512 << 10;  ///< bytes per RMA write (kMinChunk..kMaxChunk): NCCL's step size too
  int inflight_per_lane = 4;     ///< RMA writes posted and not yet completed, per lane (1..kMaxInflight)

  static constexpr int kMaxLanes = 64;
  static constexpr std::size_t kMinChunk = 4096;
  static constexpr std::size_t kMaxChunk = std::size_t(1) << 30;
  static constexpr int kMaxInflight = 256;
};

/// PICKLE_NET_PROVIDER, PICKLE_NET_IFACE, PICKLE_NET_LANES and PICKLE_NET_CHUNK (docs/env.md); out-of-range values
/// are an InvalidArgument naming the variable.
NetOptions options_from_env();

/// Throws InvalidArgument naming the field when an option is out of range or the provider name is empty.
void validate(const NetOptions& options);

}  // namespace pickle::transport::net
