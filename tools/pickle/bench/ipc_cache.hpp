#pragma once
// The second half of `pickle bench ipc`: what pickle's mapping cache saves. Rank 0 sends a 4 KiB message into a
// buffer of rank 1 through a Communicator, again and again into the same allocation. The first transfer maps the
// allocation in rank 0 (stats().ipc.ipc_opens goes up by one); every later one finds it in the cache and opens
// nothing. Timed on the receiver, from recv() to completion, with the send already posted.

#include <pickle/bootstrap.hpp>
#include <pickle/memory.hpp>

#include "ipc_report.hpp"
#include "lockstep.hpp"

namespace pickle::bench {

/// Collective (every rank; ranks beyond 1 only keep in step). `steady`: transfers after the first. Failures are
/// recorded in `result`, never thrown, except LockstepBroken (the ranks can no longer agree): then `result` holds
/// what was measured and its error, the communicator is left as it is (not torn down against a peer that is gone:
/// Lockstep::end_broken_run) and the exception goes on.
void measure_ipc_cache(Store& store, Lockstep& lockstep, MemoryKind kind, int device, int steady,
                       IpcCacheResult& result);

}  // namespace pickle::bench
