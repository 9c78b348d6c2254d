#pragma once
// The transport pickle would choose for each pair of GPUs of this host (or for host-memory ranks when there is no
// GPU), and why: the same function the Communicator calls (transport/select.hpp), fed with what `pickle info` found.

#include <string>
#include <vector>

#include "core/json.hpp"
#include "topology/topology.hpp"

namespace pickle::cli {

struct PairTransport {
  std::string pair;       ///< "GPU0 <-> GPU1", or "host ranks"
  std::string transport;  ///< "ipc", "shm", "net", or "error"
  std::string reason;     ///< why, or the error a communicator would raise
};

/// One entry per unordered GPU pair (one "host ranks" entry without GPUs), honouring PICKLE_TRANSPORT.
std::vector<PairTransport> pair_transports(const topology::Topology& topo);

json::Value pair_transports_json(const std::vector<PairTransport>& pairs);

}  // namespace pickle::cli
