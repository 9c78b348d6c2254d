#pragma once
// The parts of a suite's result file (--json, schema "pickle-bench/1", keys in docs/bench.md) that every suite
// writes the same way: the head, the sweep's options, string lists, and the file itself with the environment and
// the topology.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {

/// Now as ISO 8601 UTC ("2026-01-02T03:04:05Z"; "?" when the clock cannot be read).
std::string utc_now();

/// A JSON array of `items`, in order.
json::Value string_array(const std::vector<std::string>& items);
json::Value number_array(const std::vector<double>& items);

/// A result object that starts with "schema", "suite", "command" (the command line as typed) and "started_utc".
json::Value result_head(std::string_view suite, const std::vector<std::string>& command,
                        const std::string& started_utc);

/// An "options" object that starts with the sweep as it ran: "min_bytes", "max_bytes" (`max_bytes`, the largest
/// size measured), "factor", -n under `count_key` and "warmup"; the suite adds its own options after them.
json::Value sweep_options_json(const SweepOptions& sweep, std::size_t max_bytes, std::string_view count_key);

/// Opens `path` for appending (a file it had to create is removed again) and throws a SystemError "cannot write the
/// <flag> file <path>" when that fails, or an InvalidArgument when `path` exists and is no regular file (a FIFO, a
/// device, a folder): called before a run, so that a folder that does not exist or a file that
/// cannot be written fails at once, not after a sweep whose results could then not be saved. An empty `path` (the
/// flag not given) passes.
void require_writable(const std::string& path, std::string_view flag = "--json");

/// Adds "environment" and "topology" to `root` and writes it to `path`: into "<path>.partial-<pid>" first, renamed
/// over `path` once complete (SystemError "cannot write the --json file <path>" when it cannot; no partial file is
/// left, and an earlier file at `path` stays whole).
void write_result_file(json::Value root, const std::string& path);

/// The run ended early, with this error (Lockstep::end_broken_run: a rank stopped or died). Every result file written
/// from then on says so (`broken_run`) and has exit code 1, whatever its rows say: a break in a teardown phase, after
/// the last row, left the file at exit code 0 while the process exited 1.
void mark_run_broken(const std::string& error);

}  // namespace pickle::bench
