// Rank programs for the shm transport and for transport selection (host memory on CPU, CUDA memory on GPUs).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "comm_children.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

std::uint64_t seed_for(int from, int to, std::size_t size, int round) {
  return (static_cast<std::uint64_t>(from) << 56) ^ (static_cast<std::uint64_t>(to) << 48) ^ (size << 4) ^
         static_cast<std::uint64_t>(round);
}

/// Whether process `pid` is stopped (state T in /proc/PID/stat, which follows the command name's closing parenthesis).
bool process_stopped(pid_t pid) {
  std::ifstream stat(cat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const std::size_t name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'T';
}

/// Waits (up to PICKLE_TIMEOUT) until the first 64 bytes of a message into host memory at `data` hold the pattern of
/// `seed`: the transfer has begun. False at the deadline.
bool await_first_bytes(const void* data, std::uint64_t seed) {
  const auto* landed = static_cast<const volatile std::uint8_t*>(data);
  const Deadline deadline = Deadline::after_seconds(env::timeout_seconds());
  while (!deadline.expired()) {
    bool started = true;
    for (std::size_t i = 0; i < 64 && started; ++i) started = landed[i] == pattern_byte(i, seed);
    if (started) return true;
  }
  return false;
}

/// What `request.wait()` threw, or "" when the request completed.
std::string failure_of_wait(Request& request) {
  try {
    request.wait();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// What the stream's synchronize threw ("" when it passed): how a consumer that only looks at its stream hears of a
/// receive's failure (Request::on_stream).
std::string failure_of_synchronize(Stream& stream) {
  try {
    stream.synchronize();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
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

// A peer that stops (SIGSTOP) in the middle of a transfer holds up that pair only: a thread that queued every pair's
// stream work waited on the stopped pair's full stream, and another pair's transfer never went out. Rank 1 tells
// ranks 0 and 2 its pid, posts its receive of rank 0's message and stops itself once the message's first bytes
// landed (host memory: it reads them). Rank 0 waits until rank 1 is stopped, then sends rank 2 a message as long;
// rank 2 must get it while rank 1 is stopped, and then resumes rank 1 (before: rank 2's receive timed out). Both
// messages are checked. args: memory kind ("host"), bytes.
PICKLE_CHILD(comm_a_stopped_peer_holds_up_no_other_pair) {
  Buffer data, other, pid;  // outlive the communicator: a receive that failed its check may still be pending
  Communicator comm = make_comm(args.at(0));
  CHILD_CHECK(comm.world_size() == 3 && comm.memory_kind() == MemoryKind::Host, "three ranks on host memory");
  const std::size_t bytes = std::stoull(args.at(1));
  const int rank = comm.rank();
  data = comm.alloc(bytes);
  pid = comm.alloc(sizeof(pid_t));
  constexpr int kPidTag = 1, kDataTag = 2;
  constexpr std::uint64_t kToRank1 = 41, kToRank2 = 42;
  if (rank == 1) {
    *static_cast<pid_t*>(pid.data()) = ::getpid();
    comm.send(0, kPidTag, pid.data(), sizeof(pid_t)).wait();
    comm.send(2, kPidTag, pid.data(), sizeof(pid_t)).wait();
    Request request = comm.recv(0, kDataTag, data.data(), bytes);
    CHILD_CHECK(await_first_bytes(data.data(), kToRank1), "rank 0's message did not start arriving within ",
                env::timeout_seconds(), " s");
    ::raise(SIGSTOP);  // rank 2 resumes this process
    request.wait();
    const std::size_t wrong = count_wrong(comm, data.data(), bytes, kToRank1);
    CHILD_CHECK(wrong == 0, "rank 1's message: ", wrong, " wrong bytes");
  } else {
    comm.recv(1, kPidTag, pid.data(), sizeof(pid_t)).wait();
    const pid_t stopped = *static_cast<const pid_t*>(pid.data());
    if (rank == 0) {
      other = comm.alloc(bytes);
      fill(comm, data.data(), bytes, kToRank1);
      fill(comm, other.data(), bytes, kToRank2);
      Request to_rank1 = comm.send(1, kDataTag, data.data(), bytes);
      const Deadline deadline = Deadline::after_seconds(env::timeout_seconds());
      while (!process_stopped(stopped) && !deadline.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      CHILD_CHECK(process_stopped(stopped), "rank 1 did not stop within ", env::timeout_seconds(), " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its pair's queue fills meanwhile
      Request to_rank2 = comm.send(2, kDataTag, other.data(), bytes);
      to_rank2.wait();
      to_rank1.wait();
    } else {
      Request request = comm.recv(0, kDataTag, data.data(), bytes);
      std::string failure;
      try {
        request.wait();
      } catch (const Error& e) {
        failure = e.what();
      }
      CHILD_CHECK(::kill(stopped, SIGCONT) == 0, "SIGCONT: ", std::strerror(errno));
      CHILD_CHECK(failure.empty(), "rank 0's message did not arrive while rank 1 was stopped: ", failure);
      const std::size_t wrong = count_wrong(comm, data.data(), bytes, kToRank2);
      CHILD_CHECK(wrong == 0, "rank 2's message: ", wrong, " wrong bytes");
    }
  }
  comm.barrier();
  return 0;
}

// A communicator destroyed while a peer is stopped (SIGSTOP) in the middle of receiving from it: the teardown ends
// (before, the shm worker that queued the send waited on the pair's full stream, and the teardown joined it: for as
// long as the peer stayed stopped). Rank 1 posts its receive and stops itself once the first bytes landed; rank 0
// waits until it is stopped, destroys its communicator with the send under way, and only then resumes rank 1, whose
// receive must fail or arrive intact, never complete with other bytes. args: memory kind ("host"), bytes.
PICKLE_CHILD(comm_teardown_while_a_peer_is_stopped) {
  Buffer data, pid;  // outlive the communicator: the send or receive under way may still use them
  std::optional<Communicator> comm(make_comm(args.at(0)));
  CHILD_CHECK(comm->world_size() == 2 && comm->memory_kind() == MemoryKind::Host, "two ranks on host memory");
  const std::size_t bytes = std::stoull(args.at(1));
  constexpr int kPidTag = 1, kDataTag = 2;
  constexpr std::uint64_t kSeed = 61;
  data = comm->alloc(bytes);
  pid = comm->alloc(sizeof(pid_t));
  if (comm->rank() == 1) {
    *static_cast<pid_t*>(pid.data()) = ::getpid();
    comm->send(0, kPidTag, pid.data(), sizeof(pid_t)).wait();
    std::vector<Request> request;  // dropped before the communicator (a Request must not outlive it)
    request.push_back(comm->recv(0, kDataTag, data.data(), bytes));
    CHILD_CHECK(await_first_bytes(data.data(), kSeed), "rank 0's message did not start arriving within ",
                env::timeout_seconds(), " s");
    ::raise(SIGSTOP);  // rank 0 resumes this process once its communicator is gone
    const std::string failure = failure_of_wait(request.front());
    std::fprintf(stderr, "rank 1: the receive %s\n", failure.empty() ? "completed" : failure.c_str());
    if (failure.empty()) {
      const std::size_t wrong = count_wrong(*comm, data.data(), bytes, kSeed);
      CHILD_CHECK(wrong == 0, "the receive completed with ", wrong, " wrong bytes of ", bytes);
    }
    request.clear();
  } else {
    comm->recv(1, kPidTag, pid.data(), sizeof(pid_t)).wait();
    const pid_t stopped = *static_cast<const pid_t*>(pid.data());
    fill(*comm, data.data(), bytes, kSeed);
    std::vector<Request> send;  // dropped before the communicator (a Request must not outlive it)
    send.push_back(comm->send(1, kDataTag, data.data(), bytes));
    const Deadline deadline = Deadline::after_seconds(env::timeout_seconds());
    while (!process_stopped(stopped) && !deadline.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHILD_CHECK(process_stopped(stopped), "rank 1 did not stop within ", env::timeout_seconds(), " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the pair's queue fills meanwhile
    send.clear();
    Stopwatch watch;
    comm.reset();
    std::fprintf(stderr, "rank 0: teardown took %.1f s\n", watch.seconds());
    CHILD_CHECK(::kill(stopped, SIGCONT) == 0, "SIGCONT: ", std::strerror(errno));
  }
  return 0;
}


// A peer stopped for longer than PICKLE_TIMEOUT (SIGSTOP here; a debugger, a long pause) fails its pair on this side,
// which lets this rank's streams run through the pair's staging rings, so that no copy touches the application's
// buffers once the failure is reported. The peer, resumed, must not take what it then finds in the ring for its
// messages (before, it completed its receive with the slots' last chunks). Rank 1 sends rank 0 a small message
// (which arrives intact before anything fails), posts its receive of rank 0's message and stops itself. Rank 0 waits
// until it is stopped, sends, and posts empty receives from rank 1 until its control channel, which rank 1 no longer
// reads, stays full for PICKLE_TIMEOUT: the pair fails, and the send with it. Rank 0 then writes other bytes into the
// send's buffer (the application may, once the send failed) and resumes rank 1, whose receive must fail or hold the
// message, and come back well within PICKLE_TIMEOUT (its failure does not release the rings again: a second move of
// the flags left its streams stuck). Rank 0 keeps its communicator until rank 1 is done (its goodbye would fail rank
// 1's receive anyway), then takes the small message: intact and complete (rank 1's failure of the pair does not mark
// it given up in turn, which failed it). args: memory kind, bytes, a folder for the ranks' files, milliseconds rank 1
// waits after it resumed before it looks at its receive (by then the ring has let the stale bytes through), and
// optionally "stream": rank 1 looks only at a stream that it gave the receive to (Request::on_stream), as a kernel
// that consumes the message would; the stream's synchronize must throw, or the message be intact.
PICKLE_CHILD(comm_a_peer_resumed_after_its_pair_failed_takes_no_stale_bytes) {
  const std::size_t bytes = std::stoull(args.at(1));
  const std::filesystem::path folder(args.at(2));
  const int look_after_ms = std::stoi(args.at(3));
  const bool on_stream_only = args.size() > 4 && args.at(4) == "stream";
  const std::filesystem::path rank1_pid = folder / "rank-1-pid", rank1_done = folder / "rank-1-checked-its-receive";
  constexpr int kDataTag = 2, kEmptyTag = 3, kEarlyTag = 4;
  constexpr std::size_t kEarlyBytes = 4096;
  constexpr std::uint64_t kSeed = 71, kOtherSeed = 72, kEarlySeed = 73;
  Buffer data, early;  // outlive the communicator: the send or receive under way may still use them
  Communicator comm = make_comm(args.at(0));
  CHILD_CHECK(comm.world_size() == 2 && comm.transport(1 - comm.rank()) == "shm", "two ranks over shm");
  data = comm.alloc(bytes);
  early = comm.alloc(kEarlyBytes);
  // Waits (60 s at most, inside the test's deadline) for a file of the other rank.
  auto await_file = [](const std::filesystem::path& path) {
    const Deadline deadline = Deadline::after_seconds(60);
    while (!std::filesystem::exists(path) && !deadline.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::filesystem::exists(path);
  };
  if (comm.rank() == 1) {
    fill(comm, early.data(), kEarlyBytes, kEarlySeed);
    comm.send(0, kEarlyTag, early.data(), kEarlyBytes).wait();  // over shm: rank 0's stream has copied it out
    std::ofstream(folder / "rank-1-pid.part") << ::getpid() << "\n";
    std::filesystem::rename(folder / "rank-1-pid.part", rank1_pid);
    Stream stream = comm.make_stream();
    std::vector<Request> request;  // dropped before the communicator (a Request must not outlive it)
    request.push_back(comm.recv(0, kDataTag, data.data(), bytes));
    if (on_stream_only) request.front().on_stream(stream);
    ::raise(SIGSTOP);  // rank 0 resumes this process once it failed the pair
    std::this_thread::sleep_for(std::chrono::milliseconds(look_after_ms));
    Stopwatch watch;
    const std::string failure = on_stream_only ? failure_of_synchronize(stream) : failure_of_wait(request.front());
    const double seconds = watch.seconds();
    std::fprintf(stderr, "rank 1: the receive %s%s (%.3f s)\n", on_stream_only ? "(on its stream) " : "",
                 failure.empty() ? "completed" : failure.c_str(), seconds);
    CHILD_CHECK(failure.empty() || failure.find("recv of " + std::to_string(bytes) + " bytes") != std::string::npos,
                "the failure does not name the receive: ", failure);
    const std::size_t wrong = failure.empty() ? count_wrong(comm, data.data(), bytes, kSeed) : 0;
    request.clear();
    std::ofstream(rank1_done) << "done\n";
    CHILD_CHECK(wrong == 0, "the receive completed with ", wrong, " wrong bytes of ", bytes);
    CHILD_CHECK(seconds < env::timeout_seconds(), "the receive came back only after ", seconds,
                " s: the pair's streams were stuck until PICKLE_TIMEOUT");
    return 0;
  }
  std::vector<Request> early_receive;  // dropped before the communicator (a Request must not outlive it)
  early_receive.push_back(comm.recv(1, kEarlyTag, early.data(), kEarlyBytes));
  CHILD_CHECK(await_file(rank1_pid), "rank 1 did not write its pid within 60 s");
  pid_t stopped = 0;
  std::ifstream(rank1_pid) >> stopped;
  fill(comm, data.data(), bytes, kSeed);
  std::vector<Request> requests;  // dropped before the communicator (a Request must not outlive it)
  requests.push_back(comm.send(1, kDataTag, data.data(), bytes));
  const Deadline deadline = Deadline::after_seconds(env::timeout_seconds());
  while (!process_stopped(stopped) && !deadline.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHILD_CHECK(process_stopped(stopped), "rank 1 did not stop within ", env::timeout_seconds(), " s");
  std::string channel_failure;
  for (int i = 0; i < 4000 && channel_failure.empty(); ++i) {
    try {
      requests.push_back(comm.recv(1, kEmptyTag, nullptr, 0));
    } catch (const Error& e) {
      channel_failure = e.what();
    }
  }
  std::fprintf(stderr, "rank 0: posting receives from the stopped rank 1: %s\n", channel_failure.c_str());
  CHILD_CHECK(!channel_failure.empty(), "4000 receives posted to a stopped peer, and its channel never filled");
  std::string send_failure;
  try {
    requests.front().test();
  } catch (const Error& e) {
    send_failure = e.what();
  }
  CHILD_CHECK(!send_failure.empty(), "the send did not fail with the pair");
  requests.clear();
  fill(comm, data.data(), bytes, kOtherSeed);  // the application reuses the failed send's buffer
  CHILD_CHECK(::kill(stopped, SIGCONT) == 0, "SIGCONT: ", std::strerror(errno));
  CHILD_CHECK(await_file(rank1_done), "rank 1 did not check its receive within 60 s");
  const std::string early_failure = failure_of_wait(early_receive.front());
  CHILD_CHECK(early_failure.empty(), "the message that arrived before the failure: ", early_failure);
  const std::size_t wrong = count_wrong(comm, early.data(), kEarlyBytes, kEarlySeed);
  CHILD_CHECK(wrong == 0, "the message that arrived before the failure has ", wrong, " wrong bytes");
  return 0;
}

}  // namespace pickle::test
