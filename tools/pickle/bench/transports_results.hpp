#pragma once
// What `pickle bench transports` measured: per operation, per configuration, the bandwidth of every run at every
// size, and the aggregates the table shows (mean over the runs, the largest size every configuration reached, the
// gains). Filled by the orchestrator (transports.cpp), rendered by transports_table and transports_json.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "transports_configs.hpp"
#include "transports_options.hpp"

namespace pickle::bench {

/// One run of one configuration: one child process set.
struct RunResult {
  enum class Status { Ok, Unavailable, Failed };
  int run = 0;                       ///< 1-based
  Status status = Status::Failed;
  std::string detail;                ///< why unavailable or failed; when ok, what the child said of its backend
  std::map<std::size_t, double> gbps;  ///< per size: the run's median (p2p: unidirectional algbw; allreduce: busbw)
  std::uint64_t wrong = 0;           ///< wrong bytes (p2p) or elements (allreduce) the child counted
  int exit_code = -1;                ///< the child's exit code; -1 when it did not exit by itself
  double seconds = 0;                ///< wall time of the child
  std::vector<std::string> command;  ///< the child's command line ("pickle", "bench", "p2p", ...)
  std::string stderr_tail;           ///< the child's last lines on stderr, kept when it failed
  std::string memory;                ///< the memory kind the child used ("cuda", "host"; "" when unknown)
  int world_size = 0;                ///< the child's rank count (0 when unknown)
};

/// "ok", "unavailable", "failed".
const char* run_status_name(RunResult::Status status) noexcept;

/// Every run of one configuration for one operation.
struct ConfigRuns {
  enum class Status { Ok, Skipped, Failed };
  const Configuration* config = nullptr;
  std::vector<RunResult> runs;

  /// Failed when a run failed; Skipped when the backend was unavailable (the first run says so, and the others are
  /// not started); else Ok.
  Status status() const;
  /// Why it was skipped or failed (the first such run's detail); empty when ok.
  std::string detail() const;
  /// The runs that measured.
  std::vector<const RunResult*> ok_runs() const;
  /// Mean over the ok runs that measured `bytes`; nullopt when none did.
  std::optional<double> mean(std::size_t bytes) const;
};

/// "ok", "skipped", "failed".
const char* config_status_name(ConfigRuns::Status status) noexcept;

/// One operation's comparison.
struct OpSection {
  TransportOp op = TransportOp::P2p;
  std::string skipped;              ///< non-empty: the operation did not run, and why (no `coll` suite in this build)
  std::vector<ConfigRuns> configs;  ///< in configurations() order

  const ConfigRuns* find(std::string_view key) const;
  /// Every size some run measured, ascending.
  std::vector<std::size_t> sizes() const;
  /// The largest size that every run of every ok configuration measured (the seed's table is at one size).
  std::optional<std::size_t> largest_common() const;
  /// mean(fast) / mean(slow) at `bytes`, when both configurations are ok and measured it.
  std::optional<double> gain(const Comparison& comparison, std::size_t bytes) const;
};

struct TransportsReport {
  TransportsOptions options;
  std::vector<std::string> command;  ///< the command line as typed ("pickle", "bench", "transports", ...)
  std::string started_utc;
  std::vector<std::string> notes;
  std::vector<OpSection> ops;
  std::string memory;  ///< the memory kind the children used, from their result files ("" when none said)
  int world_size = 0;  ///< their rank count (0 when none said)

  /// 1 when a configuration failed; else 0 (skipped rows and operations are not failures).
  int exit_code() const;
};

/// What the table and the JSON call an operation's number: "unidirectional bandwidth (GB/s)" or "busbw (GB/s)".
const char* metric_name(TransportOp op) noexcept;

}  // namespace pickle::bench
