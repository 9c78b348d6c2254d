// Two shm transports of one pair in one process (host memory, joined by a socketpair): what a failure of the pair on
// one side leaves for the other side's streams.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "device/fd_channel.hpp"
#include "device/host/backoff.hpp"
#include "transport/shm/shm_transport.hpp"

namespace pickle::transport::shm {
namespace {

struct Pair {
  std::unique_ptr<ShmTransport> rank0, rank1;
};

/// Ranks 0 and 1 of a pair over shm, with 4 KiB chunks and 2 slots (PICKLE_SHM_CHUNK, PICKLE_SHM_SLOTS).
Pair make_pair() {
  ::setenv("PICKLE_SHM_CHUNK", "4096", 1);
  ::setenv("PICKLE_SHM_SLOTS", "2", 1);
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  std::vector<std::optional<device::FdChannel>> to_rank1(2), to_rank0(2);
  to_rank1[1].emplace(UniqueFd(fds[0]), "rank 0 to 1");
  to_rank0[0].emplace(UniqueFd(fds[1]), "rank 1 to 0");
  const Deadline deadline = Deadline::after_seconds(10);
  auto ignore_failure = [](int, const std::string&) {};
  Pair pair;
  // Each constructor sends its ring, then maps the peer's: both at once.
  std::thread rank0([&] {
    pair.rank0 = std::make_unique<ShmTransport>(0, MemoryKind::Host, 0, std::vector<bool>{false, true}, to_rank1,
                                                deadline, ignore_failure);
  });
  pair.rank1 = std::make_unique<ShmTransport>(1, MemoryKind::Host, 0, std::vector<bool>{true, false}, to_rank0,
                                              deadline, ignore_failure);
  rank0.join();
  return pair;
}

// Rank 0 sends 1 MiB (256 chunks, more than its worker queues ahead) and fails the pair while rank 1 had not yet
// queued its receive (it was stopped); rank 1 then queues it and waits on its stream only, without failing the pair
// itself. Its stream must run through: rank 0's streams, running through the released ring, wrote older uses back
// over raised flags, and rank 0's release must leave none of them below its target (it did, in 29 of 30 runs, when
// the last raise came before the last of those writes).
TEST(ShmTransport, AReleaseLeavesNoFlagThatItsOwnStreamsWroteBackForThePeerToStopOn) {
  constexpr std::size_t kBytes = 1u << 20;
  constexpr int kRounds = 5;
  int stuck = 0;
  for (int round = 0; round < kRounds; ++round) {
    Pair pair = make_pair();
    std::vector<std::byte> source(kBytes, std::byte{1}), destination(kBytes);
    alignas(64) std::uint32_t done = 0;
    const std::optional<std::uint64_t> first = pair.rank0->send(1, source.data(), kBytes);
    ASSERT_TRUE(first.has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // rank 0's worker queues its chunks meanwhile
    pair.rank0->release(1, Deadline::after_seconds(5));
    pair.rank1->receive(0, *first, destination.data(), kBytes, &done, 1);
    const Deadline deadline = Deadline::after_seconds(2);
    while (device::host::load_acquire(&done) != 1 && !deadline.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (device::host::load_acquire(&done) != 1) ++stuck;
    pair.rank1->release(0, Deadline::after_seconds(5));  // lets a stuck stream go, so that the transports can close
  }
  EXPECT_EQ(stuck, 0) << "rank 1's receiving stream stopped on a flag that rank 0's streams wrote back, in " << stuck
                      << " of " << kRounds << " rounds";
}

}  // namespace
}  // namespace pickle::transport::shm
