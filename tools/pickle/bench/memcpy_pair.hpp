#pragma once
// The two-rank frame that `pickle bench memcpy` and `pickle bench ipc` share: started alone they relaunch as ranks;
// as ranks, rank 0 decides the memory kind and a nonce for everyone, ranks 0 and 1 open a file-descriptor channel
// to pass exported memory, and a failure every rank agreed on ends the run with one report from rank 0. Rank 1
// exports, rank 0 imports (the seed's "dst gpu open & close": the copying side maps the peer's buffer).

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>
#include <pickle/memory.hpp>

#include "device/fd_channel.hpp"
#include "lockstep.hpp"

namespace pickle::bench {

/// What rank 0 decides for both ranks at the start.
struct PairPlan {
  MemoryKind kind = MemoryKind::Host;
  std::string nonce;        ///< names this job's fd socket, so that concurrent runs on one host never meet
  std::string started_utc;  ///< "2026-01-02T03:04:05Z"
  std::string why;          ///< why this memory kind ("--memory cuda", "2 GPUs", "no GPU: ...")
};

/// What a suite asks of the plan.
struct PairPlanRequest {
  std::string suite;                      ///< "memcpy", for messages
  std::string memory;                     ///< --memory: "host", "cuda" or "" (cuda when rank 0 sees >= 2 GPUs)
  /// (path, flag) of the --csv/--json files rank 0 must be able to write; an empty path is a flag not given.
  std::vector<std::pair<std::string, std::string>> output_files;
  std::string gpu_only_option;            ///< e.g. "--method vmm" when given: an InvalidArgument on host memory
};

/// Collective: agrees on the plan (ranks 0 and 1 must share a host). Throws AgreedFailure.
PairPlan agree_on_pair_plan(Lockstep& lockstep, int rank, const PairPlanRequest& request);

/// Where the pair's buffers live, as rank 0 decides it: `request.memory`, else GPU memory with 2 GPUs or more; `why`
/// says how. A GPU-only option (`request.gpu_only_option`) on host memory is an InvalidArgument.
bool pair_uses_cuda(const PairPlanRequest& request, std::string& why);

/// Ranks 0 and 1: the fd channel between them (rank 1 listens, rank 0 connects), bounded by the store's timeout.
device::FdChannel connect_pair_channel(const Store& store, const std::string& nonce, std::string_view suite);

/// Runs a suite's rank body with the frame around it: checks the world size, turns AgreedFailure into one report
/// from rank 0 (exit 2 for InvalidArgument, else 1) and makes ranks other than 0 exit 0 on agreed outcomes (a
/// launcher stops the job at the first failing rank, which could cut rank 0 short while it writes its report).
int run_pair_rank(std::string_view suite, const std::function<int(Store&, Lockstep&)>& body);

/// Started alone: relaunches `pickle bench <suite> args...` as 2 local ranks (exit code of the launcher). Before any
/// rank starts, as the ranks would: --memory cuda without a GPU is refused (UnavailableError), the output files must
/// be writable (SystemError), and a GPU-only option on host memory is a bad command line (said here, exit 2).
int relaunch_pair(const PairPlanRequest& request, const std::vector<std::string>& args);

}  // namespace pickle::bench
