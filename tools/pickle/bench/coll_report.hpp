#pragma once
// What a coll run measured, and its two renderings: the nccl-tests-style table (stdout) and the result file (--json,
// schema "pickle-bench/1", keys in docs/bench.md). Every rank ends the run with the same CollReport (the measurements
// travel through the store), so that all of them agree on the exit code; rank 0 prints and writes it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <pickle/collectives.hpp>
#include <pickle/memory.hpp>

#include "coll_options.hpp"
#include "core/json.hpp"
#include "p2p_report.hpp"

namespace pickle::bench {

/// One collective x datatype x operator x size: what every backend runs, out-of-place and in-place.
struct CollPoint {
  Collective coll = Collective::AllReduce;
  DataType type = DataType::F32;
  ReduceOp op = ReduceOp::Sum;  ///< meaningful for reductions only
  int root = 0;                 ///< meaningful for broadcast only
  CollShape shape;
};

/// One backend x point x placement.
struct CollResult {
  std::string backend;
  CollPoint point;
  bool in_place = false;
  int iterations = 0;
  /// Per repeat: microseconds per call, the slowest rank's.
  std::vector<double> time_us;
  std::optional<std::uint64_t> wrong;  ///< elements that differ, summed over ranks; unset with -c 0 or on failure
  /// Bytes the timed calls copied inside the ranks' own memory, per call, summed over ranks (SM work on CUDA: the
  /// copy-only collectives' one use of SMs); unset where the backend does not say (NCCL) or on failure.
  std::optional<double> local_copy_bytes_per_call;
  std::string unsupported;             ///< why the backend cannot run this placement (NCCL in-place alltoall)
  std::string error;                   ///< set when the measurement failed

  bool measured() const { return error.empty() && unsupported.empty() && !time_us.empty(); }
};

struct CollReport {
  CollOptions options;
  std::vector<std::string> command;  ///< the command line as typed ("pickle", "bench", "coll", ...)
  std::string started_utc;
  MemoryKind memory = MemoryKind::Host;
  int world_size = 0;
  std::vector<CollPoint> points;
  std::vector<std::string> notes;  ///< things the reader must know (sizes dropped, ...)
  bool gpus_shared = false;        ///< two ranks ran on one GPU: a functional run, no link measured
  std::vector<BackendRun> backends;
  std::vector<CollResult> results;

  /// 0 when every backend that ran passed every check; 1 otherwise.
  int exit_code() const;
};

/// GB/s (1e9 bytes per second) of `bytes` per call at `time_us` per call.
double coll_algbw_gbps(std::size_t bytes, double time_us) noexcept;
/// The busbw of a measured result's median time on `nranks` ranks (nccl-tests' factor).
double coll_median_busbw_gbps(const CollResult& result, int nranks);

/// "none" for the collectives without an operator, else reduce_op_name.
const char* op_column(const CollPoint& point) noexcept;
/// The root column: the root for broadcast, -1 otherwise (nccl-tests).
int root_column(const CollPoint& point) noexcept;

/// The table: per collective and backend, a header, a row per datatype, operator and size with out-of-place and
/// in-place time, algbw, busbw and #wrong, and the "# Avg bus bandwidth" footer.
void print_coll_table(const CollReport& report, std::FILE* out);

/// The result file's content except "topology" and "environment", which the caller adds.
json::Value coll_to_json(const CollReport& report);

}  // namespace pickle::bench
