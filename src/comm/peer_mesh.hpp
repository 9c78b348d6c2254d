#pragma once
// The control channels of a communicator: one Unix socket between every pair of ranks on this host. They carry
// memory announcements (with file descriptors) and posted receives, and their end-of-stream is how a rank learns,
// at once, that a peer died.

#include <optional>
#include <vector>

#include <pickle/bootstrap.hpp>

#include "core/clock.hpp"
#include "device/fd_channel.hpp"

namespace pickle::comm {

/// channels[peer] is connected for every peer != self.rank (empty at self.rank). Collective over the store, under
/// the communicator's key prefix: every rank listens on a name derived from a nonce that rank 0 publishes, connects
/// to the lower ranks and accepts the higher ones (each connector says who it is first).
std::vector<std::optional<device::FdChannel>> connect_peer_mesh(Store& store, const std::string& key_prefix,
                                                               const RankInfo& self, const Deadline& deadline);

}  // namespace pickle::comm
