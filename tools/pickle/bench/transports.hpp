#pragma once
// `pickle bench transports`: seed 000's P2P-vs-SHM comparison. An orchestrator, not a rank program: NCCL reads its
// environment once, at initialisation, so each configuration runs in a process set of its own, started as
// `pickle bench p2p|coll` with the configuration's environment.

#include <string>
#include <vector>

namespace pickle::bench {

/// Runs the transports suite with the arguments after "transports". Returns the exit code: 0 when every
/// configuration that could run passed (unavailable ones are skipped rows), 1 when a child failed or its data was
/// wrong, 2 on bad flags.
int run_transports(const std::vector<std::string>& args);

}  // namespace pickle::bench
