// A peer host that vanishes without a word (power loss, a partition): no reset, no FIN, its sockets never close.
// Ranks 0 and 1 run on two "hosts" (network namespaces joined by a veth link); once rank 1 waits for rank 0 (a
// posted receive, and a stream waiting on it), the test takes rank 0's end of the link down. Rank 1 must hear of it
// from its control channel's TCP keepalive (bootstrap/socket.hpp), after about PICKLE_TIMEOUT of silence, and its
// stream must then be released: a stream wait has no timeout of its own, and nothing else would ever end it.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "netns_pair.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

constexpr int kTimeoutSeconds = 30;  // PICKLE_TIMEOUT: the connection is given up after that much silence
constexpr double kNoticedWithinSeconds = kTimeoutSeconds + 10;  // probes are 5 s apart

// args: directory for the "ready" files.
PICKLE_CHILD(vanished_host_rank) {
  Communicator comm = Communicator::from_env();
  Buffer buffer = comm.alloc(4096);
  comm.barrier();  // every connection is up and has carried data
  Request receive;
  Stream stream = comm.make_stream();
  if (comm.rank() == 1) {
    receive = comm.recv(0, 0, buffer.data(), 4096);
    receive.on_stream(stream);
  }
  std::ofstream(args.at(0) + "/ready" + std::to_string(comm.rank())) << "ready\n";
  if (comm.rank() == 0) {
    ::pause();  // the host "vanishes" with this process still in it; the test kills it at the end
    return 1;
  }
  // The receive's own wait would give up after PICKLE_TIMEOUT whatever happened to the peer: poll instead, and
  // expect the peer's failure, and nothing else, to end it.
  Stopwatch watch;
  double noticed = 0;
  while (true) {
    try {
      if (receive.test()) {
        std::fprintf(stderr, "rank 1: the receive from a vanished host completed\n");
        return 2;
      }
    } catch (const PeerError& e) {
      noticed = watch.seconds();
      std::fprintf(stderr, "rank 1: the receive failed after %.1f s: %s\n", noticed, e.what());
      break;
    }
    if (watch.seconds() > 3 * kTimeoutSeconds) {
      std::fprintf(stderr, "rank 1: nothing noticed that rank 0's host vanished in %.0f s\n", watch.seconds());
      return 3;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (noticed > kNoticedWithinSeconds) return 4;
  // The failure released the stream's wait (no TimeoutError after PICKLE_TIMEOUT), and the stream reports it.
  Stopwatch released;
  try {
    stream.synchronize();
    std::fprintf(stderr, "rank 1: the stream passed the failed receive without reporting it\n");
    return 6;
  } catch (const PeerError& e) {
    std::fprintf(stderr, "rank 1: the stream reported: %s\n", e.what());
  }
  std::fprintf(stderr, "rank 1: stream released %.3f s after the failure\n", released.seconds());
  return released.seconds() < 5 ? 0 : 5;
}

TEST(VanishedHost, ARankWaitingOnAPeerHostThatVanishedFailsItAndReleasesItsStream) {
#ifndef PICKLE_HAVE_LIBFABRIC
  GTEST_SKIP() << "ranks on two hosts need the net transport (libfabric)";
#endif
  std::string why_not;
  auto pair = NetnsPair::create(&why_not);
  if (!pair) GTEST_SKIP() << why_not;
  TempDir dir("vanished-host");
  const int port = free_tcp_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> env = {"RANK=" + std::to_string(rank), "WORLD_SIZE=2", "LOCAL_RANK=0",
                                    "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=" + pair->address(0),
                                    "MASTER_PORT=" + std::to_string(port),
                                    "PICKLE_TIMEOUT=" + std::to_string(kTimeoutSeconds),
                                    "PICKLE_NET_PROVIDER=tcp", "PICKLE_NET_IFACE=" + pair->iface(rank),
                                    "PATH=/usr/bin:/bin"};
    pids.push_back(spawn_program(pair->exec_in(rank, {self_exe(), "--pickle-child", "vanished_host_rank", dir.str()}),
                                 env, dir / ("out" + std::to_string(rank)), dir / ("err" + std::to_string(rank))));
  }
  const Deadline ready_by = Deadline::after_seconds(60);
  while (!(std::filesystem::exists(dir / "ready0") && std::filesystem::exists(dir / "ready1")) && !ready_by.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(dir / "ready1")) << read_file(dir / "err0") << read_file(dir / "err1");
  ASSERT_TRUE(pair->cut(0));
  Stopwatch watch;
  auto status = wait_pid(pids[1], std::chrono::seconds(4 * kTimeoutSeconds));
  const double seconds = watch.seconds();
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  wait_pid(pids[0], std::chrono::seconds(10));
  if (status.timed_out) wait_pid(pids[1], std::chrono::seconds(10));
  const std::string err = read_file(dir / "err1");
  EXPECT_TRUE(status.ok()) << "rank 1 " << status.describe() << " after " << seconds << " s\n" << err;
  std::cout << "rank 1 after " << seconds << " s: " << err << std::endl;
}

}  // namespace
}  // namespace pickle::test
