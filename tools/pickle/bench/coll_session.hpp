#pragma once
// What the ranks of `pickle bench coll` and `pickle bench scenario` share around their measurements: the plan that
// rank 0 decides for everyone (memory kind), the rank's context, starting and stopping one backend in step, and
// the exit-code convention (rank 0 reports what every rank agreed on).

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>
#include <pickle/memory.hpp>

#include "coll_backend.hpp"
#include "coll_context.hpp"
#include "lockstep.hpp"
#include "p2p_report.hpp"

namespace pickle::bench {

/// Runs `body` as one rank of `suite` ("coll", "scenario"): discovers the rank, and turns the outcome into the
/// process's exit code. Rank 0 carries the verdict of outcomes that every rank agreed on (the others exit 0 then,
/// because a launcher stops the whole job at the first failing rank, which could cut rank 0 short while it writes
/// the report); an AgreedFailure is printed by rank 0 and exits 1, or 2 when it is a bad command line
/// (InvalidArgument, e.g. a root beyond the world size). Errors that break the agreement itself are thrown.
int run_coll_session(std::string_view suite, const std::function<int(const RankInfo&)>& body);

/// The memory the run uses, as rank 0 decided for everyone: --memory, else Cuda when rank 0's host has a GPU for
/// each of its local ranks. Rank 0 also checks that the --json file can be written (before a long run, not after).
MemoryKind agree_on_memory(Lockstep& lockstep, const RankInfo& self, const std::string& memory,
                           const std::string& json_path);

/// How large a buffer to try first for sizes from `smallest` to `largest` when each rank holds `buffers` of them:
/// `largest` on GPUs (allocation halves it while it does not fit); on host memory, where every local rank shares
/// one host, at most a quarter of MemAvailable for all the local ranks' buffers together, but never below `smallest`.
std::size_t first_buffer_bytes(MemoryKind kind, std::size_t smallest, std::size_t largest, int buffers,
                               int local_ranks);

/// Binds the rank's GPU (Cuda: GPU local_rank) and makes its context, in one agreed phase.
/// `shared_gpu` gets shared_gpu_note() of the ranks' GPUs: empty unless two ranks share one.
std::unique_ptr<CollContext> make_context(Lockstep& lockstep, Store& store, MemoryKind kind,
                                          std::string& shared_gpu);

/// Probes and sets up `backend` on every rank (two agreed phases): Ok with its detail, Unavailable (absent
/// hardware or library: a fact about this machine, not a failure) or Failed with the first rank's error.
BackendRun start_backend(CollContext& ctx, Lockstep& lockstep, CollBackend& backend);

/// Drains this rank's stream and destroys the backend before any rank moves on to the next one (abandoning it
/// first when it failed, so that teardown does not wait for peers that may be gone).
void stop_backend(CollContext& ctx, Lockstep& lockstep, std::unique_ptr<CollBackend>& backend, bool failed);

/// Each backend of `names` in turn on every rank: made (its store keys under "bench/<suite>/<index>"), started,
/// measured by `measure(backend, index)` when it is available, and stopped; then the context is freed. `measure`
/// returns the first error of the backend ("" when none), which marks it failed. Appends how each backend fared to
/// `runs`, in order; then rank 0 calls `write_report` (Lockstep::run_then_report). When the ranks can no longer
/// agree (LockstepBroken), the backend it stopped is appended as failed and left as it is, and the run ends in
/// Lockstep::end_broken_run (rank 0 calls `write_report` first).
void run_backends(std::unique_ptr<CollContext>& ctx, Lockstep& lockstep, std::string_view suite,
                  const std::vector<std::string>& names,
                  const std::function<std::string(CollBackend&, std::size_t)>& measure, std::vector<BackendRun>& runs,
                  const std::function<void()>& write_report);

/// Destroys the rank's context (buffers, streams) in one agreed phase: every rank is done with its peers' memory.
void free_context(Lockstep& lockstep, std::unique_ptr<CollContext>& ctx);

}  // namespace pickle::bench
