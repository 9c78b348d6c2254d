#pragma once
// What an interference run measured, and its two renderings: the human table (stdout) and the result file (--json,
// schema "pickle-bench/1", suite "interference", keys in docs/bench.md). Rank 1 measures; every row travels to rank
// 0 through the store, which prints and writes. A waived run (fewer than 2 GPUs) is a report with `waived` set.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "foreground_info.hpp"
#include "interference_options.hpp"
#include "interference_window.hpp"

namespace pickle::bench {

/// One background x backend as set up on ranks 0 and 1.
struct TrafficRun {
  std::string background;  ///< "p2p", "allgather"
  std::string backend;     ///< "pickle", "nccl"
  RunStatus status = RunStatus::Ok;
  std::string detail;
};

/// One foreground x background x backend x size.
struct InterferenceRow {
  std::string foreground, background, backend;
  std::size_t bytes = 0;
  /// Per iteration, foreground alone (CUDA events around -n iterations), measured just before the background started
  /// and again just after it stopped: a GPU warms up and clocks down over seconds of full load, and the mean of a
  /// measurement on each side of t_with cancels that drift, which would otherwise read as interference.
  double alone_before_ms = 0, alone_after_ms = 0;
  double with_ms = 0;  ///< per iteration, with the background running
  WindowStats window;   ///< what the background did during the timed window with traffic
  std::optional<std::uint64_t> background_wrong;  ///< received bytes that differ; unset with -c 0 or on failure
  std::optional<std::uint64_t> foreground_wrong;  ///< output elements that differ from the first run; likewise
  std::string error;  ///< set when the row failed to measure

  /// The mean of the two measurements alone.
  double alone_ms() const noexcept { return (alone_before_ms + alone_after_ms) / 2; }
  /// t_alone / t_with; 0 when not measured.
  double relative() const noexcept;
  /// Measured, overlapped, nothing wrong.
  bool passed() const noexcept;
};

struct InterferenceReport {
  InterferenceOptions options;
  std::vector<std::string> command;  ///< the command line as typed
  std::string started_utc;
  int world_size = 0;
  std::string waived;  ///< non-empty: why nothing ran ("needs 2 CUDA GPUs (found 0)")
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
/// size (sizes in bytes, as the other suites print them).
void print_interference_table(const InterferenceReport& report, std::FILE* out);

/// The result file's content except "topology" and "environment", which write_result_file adds.
json::Value interference_to_json(const InterferenceReport& report);

/// A row as a JSON object (the result file's entry) and back: rank 1 measures and hands it (and the foregrounds,
/// foreground_info.hpp) to rank 0 through the store in this form. from_json throws ProtocolError on a malformed
/// object.
json::Value row_to_json(const InterferenceRow& row);
InterferenceRow row_from_json(const json::Value& value);
}  // namespace pickle::bench
