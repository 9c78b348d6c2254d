#pragma once
// The Communicator a benchmark backend measures: its own store on a fresh port that rank 0 picks and publishes in
// the benchmark's store, so that the benchmark's store (and any ranks left out) stay out of it.

#include <string>

#include <pickle/bootstrap.hpp>
#include <pickle/communicator.hpp>

namespace pickle::bench {

/// A Communicator of the first `ranks` ranks of `store`'s job (every rank when `ranks` is 0), on a fresh port that
/// rank 0 picks and publishes under `port_key`. Collective over those ranks; `device` is used for Cuda memory only.
/// A subset is taken as ranks of one host (its local world is `ranks` too).
Communicator connect_bench_communicator(Store& store, MemoryKind kind, int device, const std::string& port_key,
                                        int ranks = 0);

/// connect_bench_communicator() of ranks 0 and 1 alone.
inline Communicator connect_pair_communicator(Store& store, MemoryKind kind, int device, const std::string& port_key) {
  return connect_bench_communicator(store, kind, device, port_key, 2);
}

}  // namespace pickle::bench
