#include "nccl_session.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle::bench {

NcclSession::~NcclSession() { close(); }

void NcclSession::load() {
  auto nvls = env::foreign("NCCL_NVLS_ENABLE");
  if (nvls && *nvls != "0") PICKLE_LOG(Warn, "bench", "NCCL_NVLS_ENABLE=" << *nvls << " overridden to 0");
  if (setenv("NCCL_NVLS_ENABLE", "0", 1) != 0) throw SystemError("setenv NCCL_NVLS_ENABLE", errno);
  api_.emplace(NcclApi::load());
}

std::string NcclSession::detail() const {
  return api_ ? cat("NCCL ", api_->version(), " (", api_->path(), ")") : std::string();
}

NcclUniqueId NcclSession::share_unique_id(Store& store, const std::string& key, int rank) const {
  NcclUniqueId id{};
  if (rank == 0) {
    // The key is always set, with the id or the reason there is none, so that no rank waits in vain.
    try {
      api_->check(api_->get_unique_id(&id), "ncclGetUniqueId", describe({.rank = 0, .op = "NCCL bootstrap"}));
    } catch (const Error& e) {
      store.set(key, std::string("E") + e.what());
      throw;
    }
    store.set(key, std::string("I") + std::string(id.internal, sizeof id.internal));
  } else {
    std::string blob = store.get_string(key);
    if (blob.empty() || blob[0] != 'I' || blob.size() != 1 + sizeof id.internal) {
      throw PeerError(cat(describe({.rank = rank, .peer = 0, .op = "NCCL bootstrap"}),
                          ": rank 0 has no NCCL id: ", blob.empty() ? std::string() : blob.substr(1)),
                      0);
    }
    std::memcpy(id.internal, blob.data() + 1, sizeof id.internal);
  }
  return id;
}

void NcclSession::init(const NcclUniqueId& id, int nranks, int rank, const std::string& what, NcclConfig* config) {
  NcclComm comm = nullptr;  // kept only once init succeeded: a failed init leaves nothing to tear down
  if (config != nullptr) {
    if (api_->comm_init_rank_config == nullptr) {
      throw UnavailableError(cat(what, ": ", api_->path(), " has no ncclCommInitRankConfig"));
    }
    api_->check(api_->comm_init_rank_config(&comm, nranks, id, rank, config), "ncclCommInitRankConfig", what);
  } else {
    api_->check(api_->comm_init_rank(&comm, nranks, id, rank), "ncclCommInitRank", what);
  }
  comm_ = comm;
}

void NcclSession::close() noexcept {
  if (comm_ == nullptr) return;
  // Destroy waits for NCCL's work to drain; after a failure the peers may never answer, so abort instead.
  int result = broken_ ? api_->comm_abort(comm_) : api_->comm_destroy(comm_);
  comm_ = nullptr;
  if (result != 0) PICKLE_LOG(Warn, "bench", "NCCL communicator teardown returned " << result);
}

}  // namespace pickle::bench
