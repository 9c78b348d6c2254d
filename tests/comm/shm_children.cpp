// Rank programs for the shm transport and for transport selection (host memory on CPU, CUDA memory on GPUs).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "comm_children.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

std::uint64_t seed_for(int from, int to, std::size_t size, int round) {
  return (static_cast<std::uint64_t>(from) << 56) ^ (static_cast<std::uint64_t>(to) << 48) ^ (size << 4) ^
         static_cast<std::uint64_t>(round);
}

}  // namespace

// Every rank sends to its right neighbour and receives from its left one, at sizes around the transport's chunk
// boundaries (chunk - 1, chunk, chunk + 1, many chunks, more than the shm ring or the net lanes hold at once), from
// aligned and unaligned offsets, several messages in flight at once. args[1]: the transport the pairs must be on,
// "shm" (the default) or "net" (forced with PICKLE_TRANSPORT).
PICKLE_CHILD(shm_boundaries) {
  Communicator comm = make_comm(args.at(0));
  const std::string transport = args.size() > 1 ? args[1] : "shm";
  const bool net = transport == "net";
  const auto chunk = static_cast<std::size_t>(env::get_int(net ? "PICKLE_NET_CHUNK" : "PICKLE_SHM_CHUNK"));
  const auto slots = static_cast<std::size_t>(net ? 4 * env::get_int("PICKLE_NET_LANES") : env::get_int("PICKLE_SHM_SLOTS"));
  const int rank = comm.rank(), world = comm.world_size();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  CHILD_CHECK(comm.transport(right) == transport && comm.transport(left) == transport, "transport ",
              comm.transport(right));
  const std::vector<std::size_t> sizes = {1,         chunk - 1,         chunk,     chunk + 1, 2 * chunk,
                                          3 * chunk + 17, slots * chunk, (2 * slots + 1) * chunk + 5};
  std::size_t total = 0;
  for (std::size_t size : sizes) total += size + 64;
  Buffer send_buffer = comm.alloc(total), recv_buffer = comm.alloc(total);
  for (int round = 0; round < 2; ++round) {
    const std::size_t misalign = round == 0 ? 0 : 7;
    std::vector<Request> recvs, sends;
    std::vector<std::size_t> offsets;
    std::size_t offset = misalign;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      offsets.push_back(offset);
      fill(comm, static_cast<char*>(send_buffer.data()) + offset, sizes[i], seed_for(rank, right, sizes[i], round));
      fill(comm, static_cast<char*>(recv_buffer.data()) + offset, sizes[i], 0xbad);
      offset += sizes[i] + 64;
    }
    // All receives posted, then all sends: every message is in flight at once and the ring wraps many times.
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      recvs.push_back(comm.recv(left, static_cast<int>(i), static_cast<char*>(recv_buffer.data()) + offsets[i], sizes[i]));
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      sends.push_back(comm.send(right, static_cast<int>(i), static_cast<char*>(send_buffer.data()) + offsets[i], sizes[i]));
    }
    for (auto& r : recvs) r.wait();
    for (auto& s : sends) s.wait();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      std::size_t wrong = count_wrong(comm, static_cast<char*>(recv_buffer.data()) + offsets[i], sizes[i],
                                      seed_for(left, rank, sizes[i], round));
      CHILD_CHECK(wrong == 0, "rank ", rank, " round ", round, ": ", wrong, " wrong bytes of ", sizes[i],
                  " from rank ", left, " (chunk ", chunk, ")");
    }
    comm.barrier();
  }
  CommStats stats = comm.stats();
  const TransportStats& used = net ? stats.net : stats.shm;
  CHILD_CHECK(used.bytes >= 2 * total - 2 * 64 * sizes.size(), transport, " bytes ", used.bytes);
  CHILD_CHECK(stats.ipc.ipc_opens == 0, "the ", transport, " transport mapped ", stats.ipc.ipc_opens,
              " peer allocations");
  comm.barrier();
  return 0;
}

// Creating a communicator fails with error code args[1] whose message contains args[2]. With args[3] == "split",
// rank 0 forces shm and the others ipc (PICKLE_TRANSPORT differing between ranks).
PICKLE_CHILD(transport_refused) {
  if (args.size() > 3 && args[3] == "split") {
    ::setenv("PICKLE_TRANSPORT", env::foreign("RANK").value_or("") == "0" ? "shm" : "ipc", 1);
  }
  const bool first = env::foreign("RANK").value_or("") == "0";
  try {
    Communicator comm = make_comm(args.at(0));
  } catch (const Error& e) {
    const std::string what = e.what();
    // Rank 0 (the store's host) checks the message; the others may instead see rank 0 leave once it has failed.
    CHILD_CHECK(!first || (error_code_name(e.code()) == args.at(1) && what.find(args.at(2)) != std::string::npos),
                what);
    return 0;
  }
  std::fprintf(stderr, "the communicator was created\n");
  return 1;
}

}  // namespace pickle::test
