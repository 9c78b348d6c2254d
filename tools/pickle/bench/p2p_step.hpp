#pragma once
// One measurement: a backend, a mode, a size. Every rank calls it with the same arguments; the phases (poison,
// warm-up, gated repeats, check) keep them in step through the Lockstep, so a failure on one rank ends the step
// on all of them with the same error.

#include <cstddef>

#include "backend.hpp"
#include "lockstep.hpp"
#include "p2p_context.hpp"
#include "p2p_options.hpp"
#include "p2p_report.hpp"

namespace pickle::bench {

/// Most stream operations a rank holds behind the gate. A CUDA stream's queue is finite (a host stream's too), and a
/// host thread that enqueues into a full queue blocks until the stream drains it, which a closed gate never lets
/// happen. nvbandwidth
/// holds a similar handful; beyond this, iterations are enqueued with the gate open (and JSON says gated=false).
inline constexpr int kMaxGatedOps = 256;

StepResult run_step(P2pContext& ctx, P2pBackend& backend, Lockstep& lockstep, const P2pOptions& options, Mode mode,
                    std::size_t bytes);

}  // namespace pickle::bench
