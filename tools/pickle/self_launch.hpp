#pragma once
// Commands that run as a set of ranks (selftest, bench suites) can be started alone: they then start their own local
// ranks through the launcher, re-running the same command line with torchrun's variables set.

#include <string>
#include <vector>

namespace pickle::cli {

/// Whether this process is one rank of a job (a launcher, srun, mpirun or torchrun set the rank variables).
bool running_as_rank();

/// Re-runs `pickle <command> args...` as `nranks` local ranks and returns the launcher's exit code.
/// `prefix_output`: prefix each line of rank r's output with "[r] " (off for commands where one rank prints a report).
int relaunch_as_ranks(int nranks, const std::string& command, const std::vector<std::string>& args,
                      bool prefix_output = true);

/// `memory` is a command's --memory: "cuda" on a machine without a GPU is an UnavailableError saying why, to be
/// thrown before any rank or child starts (each would fail alone in its own cudaSetDevice).
void refuse_cuda_memory_without_gpu(const std::string& memory);

/// How many local ranks a command started alone should use: `requested` when > 0, else one per GPU when there are
/// at least two, else 2 host-memory ranks. `why` says which, for the user. Calls refuse_cuda_memory_without_gpu.
int default_rank_count(int requested, const std::string& memory, std::string& why);

}  // namespace pickle::cli
