#pragma once
// What a p2p run measured, and its two renderings: the human table (stdout) and the result file (--json, schema
// "pickle-bench/1", keys in docs/bench.md). Every rank ends the run with the same P2pReport (the measurements are
// exchanged through the store), so that all of them agree on the exit code; rank 0 prints and writes it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <pickle/memory.hpp>

#include "core/json.hpp"
#include "p2p_options.hpp"
#include "sample_summary.hpp"

namespace pickle::bench {


/// One backend x mode x size.
struct StepResult {
  std::string backend;
  Mode mode = Mode::Uni;
  std::size_t bytes = 0;
  int iterations = 0;
  /// Per repeat: microseconds per iteration (one-way, i.e. half a round trip, for lat), the slowest rank's.
  std::vector<double> time_us;
  std::optional<std::uint64_t> wrong;  ///< bytes that differ, summed over receivers; unset with -c 0 or on failure
  bool gated = true;                   ///< enqueue happened behind the gate (not timed)
  /// Peer allocations mapped during the timed repeats, summed over ranks, for backends that count them (pickle).
  std::optional<std::uint64_t> mapping_opens;
  /// Sends whose completion write went to a completion lane during the timed repeats, summed over ranks (pickle).
  std::optional<std::uint64_t> completion_lane_writes;
  std::string error;                   ///< set when the step failed
};

/// How a backend fared as a whole.
struct BackendRun {
  enum class Status { Ok, Unavailable, Failed };
  std::string name;
  Status status = Status::Ok;
  std::string detail;  ///< why unavailable or failed, or the library version that ran
};
const char* status_name(BackendRun::Status status) noexcept;

/// What failed its data check, said once at the end of a run (helper-reviewed 2026-11-30: a run with wrong data
/// exited 1 with nothing but a number in a table column): `wrong` units (bytes, elements) over the rows named in
/// `rows` (the first few, then how many more). Rank 0 prints "# FAILED: <text>" on `out` and "pickle bench <suite>:
/// FAILED: <text>" on stderr; nothing when `wrong` is 0.
struct WrongData {
  std::uint64_t wrong = 0;
  std::vector<std::string> rows;
  /// Adds a checked row's count (nothing for 0).
  void add(std::uint64_t count, std::string row);
};
void say_wrong_data(std::string_view suite, const WrongData& data, std::string_view unit, std::FILE* out);

/// The head that every suite's table of several backends starts with: "# <name> <status>[: <detail>]" for each
/// backend, then "# note: <note>" for each note.
void print_backends_and_notes(const std::vector<BackendRun>& backends, const std::vector<std::string>& notes,
                              std::FILE* out);

/// The result file's "backends": {"name", "status", "detail"} of each backend, in order.
json::Value backends_json(const std::vector<BackendRun>& backends);

/// {"median", "min", "max"} of `s`.
json::Value summary_json(const Summary& s);

/// summary_json() of `samples` with "samples" (each one, in order) added; null when there are none.
json::Value samples_json(const std::vector<double>& samples);

struct P2pReport {
  P2pOptions options;
  std::vector<std::string> command;  ///< the command line as typed ("pickle", "bench", "p2p", ...)
  std::string started_utc;           ///< when the run started, ISO 8601 ("2026-11-22T10:04:05Z")
  MemoryKind memory = MemoryKind::Host;
  int world_size = 0;
  std::vector<std::size_t> sizes;
  std::vector<std::string> notes;  ///< things the reader must know (sizes dropped for lack of memory, ...)
  bool gpus_shared = false;        ///< ranks 0 and 1 ran on one GPU: a functional run, no link measured
  std::vector<BackendRun> backends;
  std::vector<StepResult> steps;

  /// 0 when every backend that ran passed every check; 1 otherwise.
  int exit_code() const;
};

/// GB/s (1e9 bytes per second) of `bytes` per iteration in `mode` at `time_us` per iteration: both directions
/// count for bi, so it is the sum of the two directions.
double algbw_gbps(Mode mode, std::size_t bytes, double time_us) noexcept;

/// The table: one row per mode and size; per backend time (us), algbw (GB/s) and #wrong; then pickle's speedup
/// over nccl and ce (ratio of bandwidths, so > 1 means pickle is faster, for lat too).
void print_table(const P2pReport& report, std::FILE* out);

/// The result file's content except "topology" and "environment", which the caller adds.
json::Value to_json(const P2pReport& report);

}  // namespace pickle::bench
