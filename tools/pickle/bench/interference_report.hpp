#pragma once
// What an interference run measured, and its two renderings: the human table (stdout) and the result file (--json,
// schema "pickle-bench/1", suite "interference", keys in docs/bench.md). The measuring ranks (interference_plan.hpp)
// hand their figures to every rank through the store; rank 0 prints and writes. A waived run (too few GPUs) is a
// report with `waived` set.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "foreground_info.hpp"
#include "interference_options.hpp"
#include "interference_row.hpp"

namespace pickle::bench {

/// One background x backend as set up on the ranks taking part.
struct TrafficRun {
  std::string background;  ///< "p2p", "allgather"
  std::string backend;     ///< "pickle", "nccl"
  RunStatus status = RunStatus::Ok;
  std::string detail;
  int lanes = 0;  ///< --lanes: the child's lane count (0 in a plain run)
  EnvList env;    ///< --lanes: the environment that forced the child onto its library's network path
};

struct InterferenceReport {
  InterferenceOptions options;
  std::vector<std::string> command;  ///< the command line as typed
  std::string started_utc;
  int world_size = 0;
  int allgather_ranks = 0;   ///< the ranks of the allgather background (whether or not it ran)
  bool gpus_shared = false;  ///< --share-gpus put ranks taking part on one GPU: functional figures only
  std::string waived;        ///< non-empty: why nothing ran ("needs 2 CUDA GPUs (found 0)")
  std::vector<std::size_t> sizes;
  std::vector<std::string> notes;
  std::vector<ForegroundInfo> foregrounds;
  std::vector<TrafficRun> traffic;
  std::vector<InterferenceRow> rows;

  /// 0 when every row that ran passed and nothing failed (unavailable is not a failure, unless required); 1
  /// otherwise.
  int exit_code() const;
};

/// The table: a header naming the foregrounds and backends, then one row per foreground x background x backend x
/// size (sizes in bytes, as the other suites print them), then each multi-rank row's figures per rank. With --lanes
/// (options.lanes), a `lanes` column after the backend's, and each traffic run's lane count in its line.
void print_interference_table(const InterferenceReport& report, std::FILE* out);

/// The result file's content except "topology" and "environment", which write_result_file adds.
json::Value interference_to_json(const InterferenceReport& report);

/// A traffic run as its entry in the result file's "traffic" array, and back (`bench interference --lanes` reads its
/// children's files); from_json throws ProtocolError on a malformed entry.
json::Value traffic_run_to_json(const TrafficRun& run);
TrafficRun traffic_run_from_json(const json::Value& value);

/// The foregrounds as the run reports them, from the "foregrounds" phase's payloads (by rank: a JSON array of
/// foreground_to_json objects from each rank that set them up, "" from the others): the lowest such rank's, except
/// that a foreground that is not ok on some rank takes that rank's status and detail ("rank 3: ..."), the worse
/// status winning (failed over unavailable). So every rank agrees on which foregrounds run. ProtocolError on a
/// malformed payload or one that lists other foregrounds.
std::vector<ForegroundInfo> combine_foregrounds(const std::vector<std::string>& payloads);
}  // namespace pickle::bench
