#pragma once
/// Bootstrap: who this process is (rank discovery from the launcher's environment) and a small TCP key-value store
/// hosted by rank 0 that the ranks use to exchange addresses and handles, count, and meet at barriers.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pickle {

/// Who this process is in its job, and where the job's store (rank 0) listens.
struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        ///< rank among the processes of this host
  int local_world_size = 1;  ///< processes of the job on this host
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  ///< 0 only for a world of one: the store then takes any free port
  /// Where the values came from: "torchrun", "openmpi", "slurm", "single" (no launcher found: a world of one)
  /// or "explicit" (built by the caller).
  std::string source = "explicit";
  std::string job_id;  ///< the launcher's job id when it has one (part of the derived token)
};

/// Reads the launcher's environment; the first launcher found wins: torchrun (RANK, ...), then Open MPI
/// (OMPI_COMM_WORLD_RANK, ...), then Slurm (SLURM_PROCID, ...); none of them gives a world of one.
/// docs/bootstrap.md lists every variable. A missing, non-numeric or inconsistent value (rank >= world size,
/// negative, no MASTER_PORT where one is required) is an InvalidArgument naming the variable.
RankInfo discover_rank_info();

/// A key-value store shared by all ranks of a job. Rank 0 hosts it (a background thread polling every connection)
/// and every rank, rank 0 included, is a client. All waits are bounded by the timeout; a rank that dies turns the
/// other ranks' pending waits into PeerError naming it. Thread-safe: a call that finds the rank's connection busy
/// with another thread's call opens a further one (at most 16 per rank), so threads never wait behind each other's
/// waits. Every call must have returned before the Store is destroyed.
class Store {
 public:
  struct Options {
    /// Seconds any single wait may take (connect + rendezvous, get, wait, barrier, allgather). 0: PICKLE_TIMEOUT.
    double timeout_seconds = 0;
    /// Shared secret every rank presents to rank 0. Empty: PICKLE_TOKEN, else a token derived from the job.
    std::string token;
  };

  /// Joins the job's store: rank 0 starts the server on master_port, then every rank connects (retrying until the
  /// timeout) and waits until all world_size ranks have joined. TimeoutError names the ranks that never arrived
  /// ("ranks 2, 3 of 4 never arrived"), or says "rank 0 at host:port never answered"; a rejected token is a
  /// ProtocolError ("store at host:port rejected our token").
  explicit Store(const RankInfo& self, Options options);
  explicit Store(const RankInfo& self);
  /// Leaves the store. On rank 0 this waits (at most the timeout) until every other rank has left, because the
  /// server lives in this process.
  ~Store();
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Sets (or replaces) a key's value (at most 64 MiB; keys at most 4096 bytes).
  void set(const std::string& key, std::span<const std::byte> value);
  void set(const std::string& key, std::string_view value);
  /// The key's value; waits until some rank sets it, up to the timeout (TimeoutError naming the key).
  std::vector<std::byte> get(const std::string& key);
  std::string get_string(const std::string& key);
  /// Whether the key is set, without waiting.
  bool check(const std::string& key);
  /// Waits until every key is set (TimeoutError names the keys still missing).
  void wait(const std::vector<std::string>& keys);
  /// Adds delta to the key's integer (created at 0) atomically and returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta);
  /// Returns when every rank has called barrier with the same name the same number of times; TimeoutError names
  /// the ranks that did not reach it, PeerError the rank that died or left before reaching it.
  void barrier(const std::string& name = "");
  /// Every rank's blob, indexed by rank (small blobs: 64 MiB in total at most). Collective, like barrier.
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine);

  const RankInfo& self() const;
  /// The timeout in seconds that this store applies to each wait.
  double timeout_seconds() const;
  /// The job has failed (a rank stopped or died, and this rank gives up): on rank 0, destroying the store then closes
  /// its server at once instead of waiting up to the timeout for the other ranks to leave. They can only fail too,
  /// and a rank that stopped never leaves. Thread-safe; no effect on other ranks.
  void mark_job_failed() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pickle
