#pragma once
// Which ranks share a host, for pickle: the ones that can share memory (memfd, CUDA IPC) and reach each other's
// abstract Unix sockets, i.e. the same kernel and the same network namespace. Ranks in separate network namespaces
// of one machine (containers, or the tests' namespace pairs) count as separate hosts and talk over the network.

#include <string>

namespace pickle::comm {

/// "<hostname> boot <kernel boot id> netns <namespace inode>": equal for two processes exactly when they share a host
/// in the sense above.
std::string host_identity();

}  // namespace pickle::comm
