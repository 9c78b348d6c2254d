#pragma once
// `pickle bench matrix`: the all-pairs P2P bandwidth matrix (nvbandwidth-style), pickle vs NCCL vs the copy engine,
// each ordered pair of devices measured by a `pickle bench p2p` child of its own (docs/bench.md).

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the suite with the arguments after `matrix`; returns the exit code (0 ok or waived, 1 failed, 2 bad
/// command line).
int run_matrix(const std::vector<std::string>& args);

}  // namespace pickle::bench
