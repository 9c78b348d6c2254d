#pragma once
// What every NCCL user of the benchmark (p2p's and coll's backends, interference's background) does the same way:
// load libnccl.so.2 with NVLink multicast forced off, bootstrap one communicator through pickle's store (rank 0's
// ncclUniqueId under one key), and tear it down at the end: destroyed, or aborted after a failure.

#include <optional>
#include <string>

#include <pickle/bootstrap.hpp>

#include "nccl_api.hpp"

namespace pickle::bench {

/// One loaded NCCL and at most one communicator of it. Not copyable or movable: the communicator must be torn
/// down exactly once, by the owner that made it.
class NcclSession {
 public:
  NcclSession() = default;
  /// close().
  ~NcclSession();
  NcclSession(const NcclSession&) = delete;
  NcclSession& operator=(const NcclSession&) = delete;

  /// Sets NCCL_NVLS_ENABLE=0 (warning when the environment asked for something else: NCCL reads it at init, and
  /// multicast must stay off on the machines we measure on) and loads libnccl.so.2 (UnavailableError without it).
  void load();

  /// The loaded API; call only after load() succeeded.
  const NcclApi& api() const { return *api_; }

  /// "NCCL 2.28.9 (/path/libnccl.so.2)", or "" before load().
  std::string detail() const;

  /// The id of a new communicator: rank 0 creates it and publishes it in `store` under `key` (or the reason it
  /// has none, so that no rank waits in vain); the others read it (PeerError when rank 0 has none).
  NcclUniqueId share_unique_id(Store& store, const std::string& key, int rank) const;

  /// Makes the communicator of `nranks` ranks from `id`; NCCL takes the current device. `what` names the init in
  /// its error ("rank 0 -> peer 1: NCCL communicator init"). With `config`, ncclCommInitRankConfig. Nothing is kept
  /// when it fails.
  void init(const NcclUniqueId& id, int nranks, int rank, const std::string& what, NcclConfig* config = nullptr);

  /// share_unique_id() then init().
  void connect(Store& store, const std::string& key, int nranks, int rank, const std::string& what,
               NcclConfig* config = nullptr) {
    init(share_unique_id(store, key, rank), nranks, rank, what, config);
  }

  /// The communicator; nullptr before connect() succeeded.
  NcclComm comm() const noexcept { return comm_; }

  /// After a failure: the peers may never answer again, so close() aborts instead of waiting for NCCL's work.
  void abandon() noexcept { broken_ = true; }

  /// Destroys the communicator (aborts it after abandon()); nothing when there is none. Later calls do nothing.
  void close() noexcept;

 private:
  std::optional<NcclApi> api_;
  NcclComm comm_ = nullptr;
  bool broken_ = false;
};

}  // namespace pickle::bench
