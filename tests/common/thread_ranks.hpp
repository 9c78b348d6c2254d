#pragma once
// Ranks that are threads of the test process (one CUDA context for all of them): what each thread's communicator
// is told about its rank, instead of the torchrun variables that run_ranks sets for ranks in processes of their own.

#include <pickle/bootstrap.hpp>

namespace pickle::test {

/// Rank `rank` of `world` ranks, all threads of this process, with the store at 127.0.0.1:`port` (free_tcp_port).
inline RankInfo thread_rank_info(int rank, int world, int port) {
  RankInfo info;
  info.rank = rank;
  info.world_size = world;
  info.local_rank = rank;
  info.local_world_size = world;
  info.master_port = port;
  return info;
}

}  // namespace pickle::test
