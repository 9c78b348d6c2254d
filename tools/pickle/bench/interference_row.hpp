#pragma once
// One row of `pickle bench interference` (foreground x background x backend x size): what each measuring rank
// measured (rank 1 of p2p; every rank of an allgather), and how those combine into the row's figures. Each rank
// hands its RankMeasurement to every other through the store (the lockstep's payload) in the JSON form below, and
// rank 0 writes the row in the result file's form (keys in docs/bench.md).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "gpu_telemetry.hpp"
#include "interference_window.hpp"

namespace pickle::bench {

/// What one rank measured in one row.
struct RankMeasurement {
  int rank = 0;
  /// Per iteration, foreground alone (CUDA events around -n iterations), measured just before the background started
  /// and again just after it stopped: a GPU warms up and clocks down over seconds of full load, and the mean of a
  /// measurement on each side of t_with cancels that drift, which would otherwise read as interference.
  double alone_before_ms = 0, alone_after_ms = 0;
  double with_ms = 0;  ///< per iteration, with the background running
  WindowStats window;  ///< what the background did during this rank's timed window with traffic
  std::optional<std::uint64_t> background_wrong;  ///< received bytes that differ; unset with -c 0
  std::optional<std::uint64_t> foreground_wrong;  ///< output elements that differ from the first run; likewise
  /// The GPU's clock and power over each of the three timings (gpu_telemetry.hpp); unset where NVML could not
  /// sample, `telemetry_source` then saying why (else what sampled it).
  std::optional<TelemetrySummary> telemetry_alone_before, telemetry_with, telemetry_alone_after;
  std::string telemetry_source;

  /// The mean of the two measurements alone.
  double alone_ms() const noexcept { return (alone_before_ms + alone_after_ms) / 2; }
  /// The two measurements alone as one (merge()); unset unless both were sampled.
  std::optional<TelemetrySummary> telemetry_alone() const;
  /// t_alone / t_with; 0 when not measured.
  double relative() const noexcept;
  /// Overlapped, nothing wrong.
  bool passed() const noexcept;
};

/// Environment variables as (name, value) pairs, in the order set.
using EnvList = std::vector<std::pair<std::string, std::string>>;

/// One foreground x background x backend x size. The row's figures combine its ranks': relative throughput is the
/// mean of the ranks' (seed 001's "mean over the 8 ranks"), with the min and max beside it; times and bandwidth are
/// means; the row overlapped when every rank's window did; wrong bytes and elements are sums.
struct InterferenceRow {
  std::string foreground, background, backend;
  std::size_t bytes = 0;
  std::vector<RankMeasurement> ranks;  ///< by rank; empty when the row failed
  std::string error;                   ///< set when the row failed to measure
  /// --lanes: the lane (socket) count of the child that measured the row, and the environment that forced its
  /// library onto the network path (interference_lanes.hpp); 0 and empty in a plain run.
  int lanes = 0;
  EnvList env;

  bool measured() const noexcept { return error.empty() && !ranks.empty(); }
  double relative() const noexcept;      ///< mean over the ranks; 0 when not measured
  double relative_min() const noexcept;  ///< 0 when not measured
  double relative_max() const noexcept;
  double alone_ms() const noexcept;         ///< mean over the ranks of each one's t_alone
  double alone_before_ms() const noexcept;  ///< likewise
  double alone_after_ms() const noexcept;
  double with_ms() const noexcept;
  double gbps() const noexcept;  ///< mean over the ranks of the background bandwidth in each one's window
  /// The ranks' telemetry alone and with the background, merged over the ranks; unset unless every rank has it.
  std::optional<TelemetrySummary> telemetry_alone() const;
  std::optional<TelemetrySummary> telemetry_with() const;
  bool overlap() const noexcept;  ///< every rank's window overlapped
  /// The rank whose window has the least background around it (the smallest of lead and tail): the weakest evidence
  /// of overlap, shown for the row. Only when measured().
  const RankMeasurement& weakest() const;
  /// Sums over the ranks; unset when a rank has none (-c 0, or not measured).
  std::optional<std::uint64_t> background_wrong() const;
  std::optional<std::uint64_t> foreground_wrong() const;
  /// Measured, and every rank overlapped with nothing wrong.
  bool passed() const noexcept;
};

/// A rank's measurement as a JSON object and back (the per_rank entries of a row, and the ranks' store payloads).
/// from_json throws ProtocolError on a malformed object.
json::Value rank_to_json(const RankMeasurement& rank);
RankMeasurement rank_from_json(const json::Value& value);

/// `env` as a JSON object {name: value}, and back (ProtocolError when a value is not a string).
json::Value env_to_json(const EnvList& env);
EnvList env_from_json(const json::Value& value);

/// A row as the result file's entry and back ("lanes" and "env" only when lanes > 0). The row-level keys are derived from per_rank, which from_json reads.
json::Value row_to_json(const InterferenceRow& row);
InterferenceRow row_from_json(const json::Value& value);

}  // namespace pickle::bench
