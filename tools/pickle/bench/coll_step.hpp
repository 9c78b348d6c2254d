#pragma once
// One point of `pickle bench coll` with one backend: out-of-place, then in-place. Every rank calls it with the same
// arguments; the phases (load, warm-up, timed repeats, check) keep them in step through the Lockstep, so a failure
// on one rank ends the point on all of them with the same error.
//
// Timing: pickle's collectives may wait on the host for control messages from the peers while they are enqueued, so
// the ranks cannot be held behind a stream gate as in p2p (a gated stream would never let the peers' messages come).
// Each repeat instead starts right after a store round that every rank joins (a barrier), records the start event
// on the idle stream (it completes at once, so it marks the first enqueue), enqueues -n calls and records the stop
// event after the last: the time runs from the first enqueue to the end of the last call's work, enqueue cost
// included. Host memory uses the host clock around the enqueues and a stream synchronize.

#include <functional>
#include <vector>

#include "coll_backend.hpp"
#include "coll_context.hpp"
#include "coll_options.hpp"
#include "coll_report.hpp"
#include "lockstep.hpp"

namespace pickle::bench {

/// Runs `point` with `backend` out-of-place and in-place (buffers 0 = send, 1 = receive / in-place buffer of `ctx`);
/// returns the two results (an in-place form the backend lacks comes back with `unsupported` set).
/// `backend_index` only varies the data between backends.
std::vector<CollResult> run_coll_point(CollContext& ctx, CollBackend& backend, int backend_index, Lockstep& lockstep,
                                       const CollOptions& options, const CollPoint& point);

/// Times `iterations` calls of `enqueue` on `ctx`'s stream as described above (the caller has just synchronised
/// the ranks); returns milliseconds for all of them.
double time_calls(CollContext& ctx, int iterations, const std::function<void()>& enqueue);

}  // namespace pickle::bench
