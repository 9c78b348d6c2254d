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

}  // namespace pickle::comm
