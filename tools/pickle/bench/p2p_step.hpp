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
/// happen. nvbandwidth holds a similar handful; beyond this, iterations are enqueued with the gate open (and JSON
/// says gated=false). A stream that says its queue's depth (the host backend's PICKLE_HOST_STREAM_DEPTH) may lower it.
inline constexpr int kMaxGatedOps = 256;

/// Whether `ops` operations of the iterations fit behind the gate on `stream`: at most kMaxGatedOps, and, where the
/// stream says its queue's depth, that queue holds them with the repeat's own operations (send window, gate wait,
/// two event records), each counted as a host callback (two entries), the most an operation takes.
bool fits_behind_gate(const device::Stream& stream, long long ops);

StepResult run_step(P2pContext& ctx, P2pBackend& backend, Lockstep& lockstep, const P2pOptions& options, Mode mode,
                    std::size_t bytes);

}  // namespace pickle::bench
