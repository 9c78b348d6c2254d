#pragma once
// The control channels of a communicator: one socket between every pair of ranks, a Unix socket between ranks of
// one host, TCP between hosts. They carry memory announcements (with file descriptors: Unix sockets only), posted
// receives and the transports' notices, and their end-of-stream is how a rank learns, at once, that a peer died.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>

#include "core/clock.hpp"
#include "device/fd_channel.hpp"

namespace pickle::comm {

/// channels[peer] is connected for every peer != self.rank (empty at self.rank). Collective over the store, under
/// the communicator's key prefix: every rank listens (on an abstract Unix name derived from a nonce that rank 0
/// publishes, and, when some peer is on another host, on a TCP port of the interface that routes to MASTER_ADDR,
/// published in the store), connects to the lower ranks and accepts the higher ones. Each connector says who it is
/// and presents the nonce first; a TCP connection without it is dropped. `same_host[peer]` picks the socket kind.
/// `barrier` meets the communicator's ranks (the job's store barrier, or a split communicator's own).
std::vector<std::optional<device::FdChannel>> connect_peer_mesh(Store& store, const std::string& key_prefix,
                                                               const RankInfo& self, const std::vector<bool>& same_host,
                                                               const std::function<void(const std::string&)>& barrier,
                                                               const Deadline& deadline);

}  // namespace pickle::comm
