#include "comm/peer_mesh.hpp"

#include <cstring>
#include <random>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/wire.hpp"

namespace pickle::comm {

std::vector<std::optional<device::FdChannel>> connect_peer_mesh(Store& store, const std::string& key_prefix,
                                                               const RankInfo& self, const Deadline& deadline) {
  const int world = self.world_size, rank = self.rank;
  // A fresh nonce per communicator: two communicators of one job, or two jobs on one host, never share names.
  if (rank == 0) {
    std::random_device random;
    store.set(key_prefix + "nonce", cat(random(), random()));
  }
  const std::string prefix = cat("pickle-", store.get_string(key_prefix + "nonce"), "-");
  device::FdListener listener(prefix + std::to_string(rank));
  store.barrier(key_prefix + "listening");

  std::vector<std::optional<device::FdChannel>> channels(world);
  for (int peer = 0; peer < rank; ++peer) {
    auto channel = device::FdChannel::connect(prefix + std::to_string(peer), deadline);
    channel.set_peer(peer);
    PayloadWriter hello;
    hello.u32(static_cast<std::uint32_t>(rank));
    channel.send(hello.take(), deadline);
    channels[peer] = std::move(channel);
  }
  for (int accepted = rank + 1; accepted < world; ++accepted) {
    auto channel = listener.accept(deadline);
    auto message = channel.recv(deadline, 4);
    PayloadReader reader("control hello", message.bytes);
    const auto peer = static_cast<int>(reader.u32("rank"));
    reader.expect_end();
    if (peer <= rank || peer >= world || channels[peer]) {
      throw ProtocolError(cat("rank ", rank, ": control channel hello from unexpected rank ", peer));
    }
    channel.set_peer(peer);
    channels[peer] = std::move(channel);
  }
  return channels;
}

}  // namespace pickle::comm
