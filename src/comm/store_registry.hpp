#pragma once
// One bootstrap store per job in a process. Several communicators of the same ranks (a data-parallel and a pipeline
// group, or one made after another) share it: a second Store on the same MASTER_PORT could not listen, and its
// clients would join the first one's rendezvous twice. Each communicator works under its own key prefix.

#include <memory>

#include <pickle/bootstrap.hpp>

namespace pickle::comm {

/// The store of `self`'s job (by MASTER_ADDR, MASTER_PORT, rank and world size), created on first use and kept for
/// the rest of the process.
std::shared_ptr<Store> shared_store(const RankInfo& self, const Store::Options& options);

/// Store::mark_job_failed on every store made here: a process that gives its job up (a peer stopped or died) does
/// not wait at exit, on rank 0, for ranks that will never leave these stores.
void mark_shared_stores_failed() noexcept;

}  // namespace pickle::comm
