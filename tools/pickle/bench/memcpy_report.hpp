#pragma once
// What a memcpy run measured, and its three renderings: the human table (stdout), the seed's CSV (--csv) and the
// result file (--json, "suite": "memcpy", keys in docs/bench.md). Rank 0 builds, prints and writes it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <pickle/memory.hpp>

#include "core/json.hpp"
#include "memcpy_options.hpp"

namespace pickle::bench {

/// One column of the seed's table at one chunk size: milliseconds per copy and the bytes found wrong after it.
struct MemcpyColumn {
  std::vector<double> samples_ms;     ///< per copy (async: one sample, the mean of the -n evented copies)
  std::optional<std::uint64_t> wrong;  ///< bytes of rank 1's buffer that differ from rank 0's pattern
  bool ran() const { return !samples_ms.empty(); }
  /// The mean of the samples (the seed's "Average"); 0 when none.
  double mean_ms() const;
};

/// One chunk size: the seed's three columns.
struct MemcpyRow {
  std::size_t bytes = 0;
  MemcpyColumn async, sync, overhead;
  std::string error;  ///< the first failure at this size, "" when none
  /// Wrong bytes summed over the columns that were checked.
  std::uint64_t wrong() const;
};

struct MemcpyReport {
  MemcpyOptions options;
  std::vector<std::string> command;
  std::string started_utc;
  MemoryKind memory = MemoryKind::Host;
  std::string method;  ///< the exporter's allocation as it happened ("vmm", "cudaMalloc", "default" for memfd)
  std::string plan_why;
  int world_size = 2;
  std::vector<MemcpyRow> rows;
  std::vector<std::string> notes;
  bool gpus_shared = false;  ///< ranks 0 and 1 ran on one GPU: a functional run, no link measured
  /// 0 when every size ran with no wrong byte; 1 otherwise.
  int exit_code() const;
};

/// GB/s (1e9 bytes per second, as the seed) of `bytes` copied in `ms`; 0 when ms is not positive.
double memcpy_gbps(std::size_t bytes, double ms) noexcept;

/// "4.00 KB", "1.00 GB": chunk sizes as the seed's CSV writes them (binary multiples, two decimals).
std::string seed_size(std::uint64_t bytes);

/// The seed's CSV header line (without the newline).
extern const char* const kMemcpyCsvHeader;

void print_memcpy_table(const MemcpyReport& report, std::FILE* out);
/// The CSV: the seed's header, then one line per size that ran (SystemError when the file cannot be written).
void write_memcpy_csv(const MemcpyReport& report, const std::string& path);
/// The result file's content except "topology" and "environment".
json::Value memcpy_to_json(const MemcpyReport& report);

}  // namespace pickle::bench
