#pragma once
// What an ipc run measured, and its renderings: the human table (stdout) and the result file (--json,
// "suite": "ipc", keys in docs/bench.md). Rank 0 builds, prints and writes it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <pickle/memory.hpp>

#include "core/json.hpp"
#include "ipc_options.hpp"

namespace pickle::bench {

/// One allocation method at one buffer size.
struct IpcRow {
  enum class Status { Ok, Unavailable, Failed };
  std::string method;  ///< "cudaMalloc", "vmm" or "memfd"
  std::size_t bytes = 0;
  Status status = Status::Ok;
  /// Microseconds per repeat: import (open), release (close), second import (re-open).
  std::vector<double> open_us, close_us, reopen_us;
  std::optional<std::uint64_t> wrong;  ///< bytes of the mapped buffer's ends that differ from rank 1's pattern
  std::string detail;                  ///< why unavailable or failed
};
const char* ipc_status_name(IpcRow::Status status) noexcept;

/// pickle's mapping cache: one 4 KiB send/recv into the same allocation, first vs steady state.
struct IpcCacheResult {
  bool ran = false;
  std::size_t bytes = 4096;
  std::string method;                  ///< the receive allocation's method (Communicator::alloc)
  double first_us = 0;                 ///< the receiver's recv-to-completion time of the first transfer
  std::vector<double> steady_us;       ///< the same for each later transfer
  std::uint64_t first_opens = 0;       ///< mappings opened by the first transfer, both ranks
  std::uint64_t steady_opens = 0;      ///< mappings opened by all later transfers together (must be 0)
  std::uint64_t wrong = 0;             ///< received bytes that differ from the sender's pattern, all transfers
  std::string error;
};

struct IpcReport {
  IpcOptions options;
  std::vector<std::string> command;
  std::string started_utc;
  MemoryKind memory = MemoryKind::Host;
  std::string plan_why;
  int world_size = 2;
  std::vector<IpcRow> rows;
  IpcCacheResult cache;
  std::vector<std::string> notes;
  bool gpus_shared = false;  ///< ranks 0 and 1 ran on one GPU: opens map memory of the importer's own GPU
  /// 0 when nothing failed, no byte was wrong and the cache's steady state opened nothing; 1 otherwise.
  int exit_code() const;
};

void print_ipc_table(const IpcReport& report, std::FILE* out);
/// The result file's content except "topology" and "environment".
json::Value ipc_to_json(const IpcReport& report);

}  // namespace pickle::bench
