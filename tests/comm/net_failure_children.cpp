// Rank programs of test_net_host.cpp for a peer that dies while data moves over the net transport: the survivors'
// operations must fail promptly, their traffic with each other must go on intact, and closing their communicators
// must not wait for PICKLE_TIMEOUT (the transport drops the dead peer's writes when the communicator fails the peer).
// And for a put whose write fails after it was announced, or a send whose write the transport refuses: the receiver
// must hear of it, not wait for its data.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pickle/error.hpp>

#include "comm_children.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "device/stream.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

constexpr int kBurst = 32;                    // messages each survivor sends to the rank that dies
constexpr std::size_t kBurstBytes = 4u << 20;  // large enough that most of the burst is still in flight at the kill
constexpr int kPosted = 4;  // receives the dying rank posts: the rest of each burst can only fail, however fast the host

std::uint64_t burst_seed(int from, int message) { return 100 + static_cast<std::uint64_t>(from) * 1000 + message; }

/// The rank that dies: posts kPosted receives per sender, checks the first two messages of every sender's burst byte
/// for byte, and SIGKILLs itself while the rest of the bursts are on their way or waiting for a receive.
int receive_a_little_then_die(Communicator& comm, const std::vector<int>& senders) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::vector<Request>> recvs(senders.size());
  for (std::size_t s = 0; s < senders.size(); ++s) {
    buffers.push_back(std::make_unique<Buffer>(comm.alloc(kBurst * kBurstBytes)));
    for (int i = 0; i < kPosted; ++i) {
      recvs[s].push_back(comm.recv(senders[s], 0, static_cast<char*>(buffers[s]->data()) + i * kBurstBytes, kBurstBytes));
    }
  }
  comm.barrier();
  for (std::size_t s = 0; s < senders.size(); ++s) {
    for (int i = 0; i < 2; ++i) {
      recvs[s][static_cast<std::size_t>(i)].wait();
      const std::size_t wrong = count_wrong(comm, static_cast<char*>(buffers[s]->data()) + i * kBurstBytes, kBurstBytes,
                                            burst_seed(senders[s], i));
      CHILD_CHECK(wrong == 0, "message ", i, " from rank ", senders[s], ": ", wrong, " bytes wrong");
    }
  }
  std::fprintf(stderr, "rank %d: first messages intact; dying with the bursts in flight\n", comm.rank());
  ::kill(::getpid(), SIGKILL);
  return 3;  // not reached
}

/// A survivor's burst to `dead`, already sent: waits for every send, and checks that they ended (completed or
/// PeerError) within half the timeout, some of them failed, and nothing else was thrown.
int expect_burst_to_fail(Communicator& comm, std::vector<Request>& sends, int dead, double timeout) {
  Stopwatch watch;
  int completed = 0, failed = 0;
  for (auto& send : sends) {
    try {
      send.wait();
      ++completed;
    } catch (const PeerError& e) {
      ++failed;
      CHILD_CHECK(std::string(e.what()).find(cat("peer ", dead)) != std::string::npos, e.what());
    }
  }
  std::fprintf(stderr, "rank %d: %d sends to rank %d completed, %d failed within %.2f s\n", comm.rank(), completed, dead,
               failed, watch.seconds());
  CHILD_CHECK(failed >= kBurst - kPosted && completed + failed == kBurst, completed, " completed, ", failed, " failed");
  CHILD_CHECK(watch.seconds() < timeout / 2, "the sends took ", watch.seconds(), " s to fail");
  return 0;
}

/// Destroys the communicator and checks that it took less than half the timeout: a bound on a hang (before the fix
/// the transport waited for the dead peer's writes until PICKLE_TIMEOUT), not a speed goal.
int close_promptly(std::unique_ptr<Communicator>& comm, double timeout) {
  const int rank = comm->rank();
  Stopwatch watch;
  comm.reset();
  std::fprintf(stderr, "rank %d: communicator teardown took %.2f s (PICKLE_TIMEOUT=%.0f)\n", rank, watch.seconds(),
               timeout);
  CHILD_CHECK(watch.seconds() < timeout / 2, "teardown took ", watch.seconds(), " s");
  return 0;
}

/// Synchronizes `stream` (waiting up to `seconds`, not PICKLE_TIMEOUT) and returns the error it reports: its code and
/// text, or nullopt when it reports none.
std::optional<std::pair<ErrorCode, std::string>> stream_error(Stream& stream, double seconds) {
  try {
    stream.impl().synchronize_until(Deadline::after_seconds(seconds));
  } catch (const Error& e) {
    return std::make_pair(e.code(), std::string(e.what()));
  }
  return std::nullopt;
}

/// The error `call` throws, as stream_error does.
template <class Call>
std::optional<std::pair<ErrorCode, std::string>> call_error(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return std::make_pair(e.code(), std::string(e.what()));
  }
  return std::nullopt;
}

bool contains(const std::optional<std::pair<ErrorCode, std::string>>& error, const std::string& text) {
  return error && error->second.find(text) != std::string::npos;
}

}  // namespace

// Rank 0 receives two messages of rank 1's burst and dies. Rank 1's sends fail with PeerError; it frees their source
// at once (the transport must no longer read it) and closes its communicator, well before PICKLE_TIMEOUT.
PICKLE_CHILD(net_sender_survives_receiver_death) {
  const double timeout = env::timeout_seconds();
  auto comm = std::make_unique<Communicator>(make_comm(args.at(0)));
  if (comm->rank() == 0) return receive_a_little_then_die(*comm, {1});
  auto source = std::make_unique<Buffer>(comm->alloc(kBurst * kBurstBytes));
  for (int i = 0; i < kBurst; ++i) {
    fill(*comm, static_cast<char*>(source->data()) + i * kBurstBytes, kBurstBytes, burst_seed(1, i));
  }
  comm->barrier();
  std::vector<Request> sends;
  for (int i = 0; i < kBurst; ++i) {
    sends.push_back(comm->send(0, 0, static_cast<char*>(source->data()) + i * kBurstBytes, kBurstBytes));
  }
  if (int rc = expect_burst_to_fail(*comm, sends, 0, timeout); rc != 0) return rc;
  source.reset();  // the application frees the failed sends' source
  return close_promptly(comm, timeout);
}

// Rank 2 dies while ranks 0 and 1 each have a burst in flight to it and exchange messages with each other. Their
// sends to rank 2 fail; their own traffic goes on intact, during the failure and after it; both close promptly.
PICKLE_CHILD(net_two_survive_third_death) {
  const double timeout = env::timeout_seconds();
  auto comm = std::make_unique<Communicator>(make_comm(args.at(0)));
  const int rank = comm->rank();
  if (rank == 2) return receive_a_little_then_die(*comm, {0, 1});
  const int other = 1 - rank;
  constexpr std::size_t kExchangeBytes = (1u << 20) + 12345;  // not a multiple of the chunk
  Buffer source = comm->alloc(kBurst * kBurstBytes);
  for (int i = 0; i < kBurst; ++i) {
    fill(*comm, static_cast<char*>(source.data()) + i * kBurstBytes, kBurstBytes, burst_seed(rank, i));
  }
  Buffer out = comm->alloc(kExchangeBytes), in = comm->alloc(kExchangeBytes);
  // One round: both ways between ranks 0 and 1, every byte checked.
  auto exchange = [&](int round) -> std::size_t {
    fill(*comm, out.data(), kExchangeBytes, 5000 + round * 2 + rank);
    Request r = comm->recv(other, 1, in.data(), kExchangeBytes);
    Request s = comm->send(other, 1, out.data(), kExchangeBytes);
    r.wait();
    s.wait();
    return count_wrong(*comm, in.data(), kExchangeBytes, 5000 + round * 2 + other);
  };
  comm->barrier();
  std::vector<Request> sends;
  for (int i = 0; i < kBurst; ++i) {
    sends.push_back(comm->send(2, 0, static_cast<char*>(source.data()) + i * kBurstBytes, kBurstBytes));
  }
  // While the burst is in flight and rank 2 dies.
  for (int round = 0; round < 3; ++round) {
    const std::size_t wrong = exchange(round);
    CHILD_CHECK(wrong == 0, "round ", round, " during the failure: ", wrong, " bytes wrong");
  }
  if (int rc = expect_burst_to_fail(*comm, sends, 2, timeout); rc != 0) return rc;
  // After it: the failed peer's release must have left the survivors' endpoints alone.
  for (int round = 3; round < 13; ++round) {
    const std::size_t wrong = exchange(round);
    CHILD_CHECK(wrong == 0, "round ", round, " after the failure: ", wrong, " bytes wrong");
  }
  bool refused = false;
  try {
    comm->send(2, 3, out.data(), 8);
  } catch (const PeerError&) {
    refused = true;
  }
  CHILD_CHECK(refused, "a send to the dead rank was accepted");
  // The close barrier, which normally keeps a rank from closing while its peers still receive from it, fails at once
  // with rank 2 dead: a zero-byte message each way (carried on the control channel, ahead of the Goodbye) says that
  // the other has received everything, so that neither closes while the other's last receive is still landing.
  Request done_recv = comm->recv(other, 2, in.data(), 0);
  comm->send(other, 2, out.data(), 0).wait();
  done_recv.wait();
  return close_promptly(comm, timeout);
}

// A put announced to its receiver whose RMA write then fails: here a write that times out in the sender's transport,
// because the receiver stops reading (rank 1 SIGSTOPs rank 0 before it puts 64 MiB and signals). Rank 1's
// PICKLE_TIMEOUT is args[1] seconds, rank 0's args[2], much longer: only rank 1's word can end rank 0's wait in time.
// Rank 1's stream reports the put's failure; rank 0, resumed, hears of it at once, and its stream, which waited for
// the signal after the put, reports PeerError naming the put instead of going on as if the data had landed (before:
// its wait held on until its own transport gave up on the partly landed put, after args[2] seconds, and was then
// released without an error). Later put, signal and wait calls of the pair are PeerErrors.
PICKLE_CHILD(net_put_write_fails_after_announcement) {
  const int rank = std::stoi(env::foreign("RANK").value());
  ::setenv("PICKLE_TIMEOUT", args.at(rank == 1 ? 1 : 2).c_str(), 1);  // before anything reads it
  const double timeout = env::timeout_seconds();
  Communicator comm = make_comm(args.at(0));
  constexpr std::size_t kBytes = 64u << 20;  // far more than loopback's socket buffers hold
  const std::string put_text = cat("put of ", kBytes, " bytes");
  Buffer window_memory = comm.alloc(kBytes);
  Window window = comm.register_memory(window_memory.data(), kBytes);
  Buffer pid = comm.alloc(sizeof(pid_t));
  Stream stream = comm.make_stream();
  if (rank == 0) {
    *static_cast<pid_t*>(pid.data()) = ::getpid();
    comm.send(1, 0, pid.data(), sizeof(pid_t)).wait();
    comm.wait(stream, 1, 0, 1);  // the signal after rank 1's put
    comm.barrier();              // rank 1 stops this process, puts, signals, and resumes it once its put failed
    Stopwatch watch;
    const auto error = stream_error(stream, 2 * timeout);
    std::fprintf(stderr, "rank 0: the wait ended after %.2f s: %s\n", watch.seconds(),
                 error ? error->second.c_str() : "without an error");
    CHILD_CHECK(error && error->first == ErrorCode::Peer, "the wait for a signal after a failed put did not fail");
    CHILD_CHECK(contains(error, "rank 0 -> peer 1: wait for signal 0 to reach 1") && contains(error, put_text) &&
                    contains(error, cat("peer 1 failed its put #0 of ", kBytes, " bytes")),
                error->second);
    CHILD_CHECK(watch.seconds() < timeout / 2, "the wait took ", watch.seconds(), " s to fail");
    const auto later = call_error([&] { comm.wait(stream, 1, 0, 2); });
    CHILD_CHECK(later && later->first == ErrorCode::Peer && contains(later, "rank 0 -> peer 1: wait"),
                later ? later->second : "a later wait was accepted");
  } else {
    comm.recv(0, 0, pid.data(), sizeof(pid_t)).wait();
    const pid_t receiver = *static_cast<const pid_t*>(pid.data());
    Buffer src = comm.alloc(kBytes);
    fill(comm, src.data(), kBytes, 77);
    comm.barrier();
    CHILD_CHECK(::kill(receiver, SIGSTOP) == 0, "SIGSTOP: ", std::strerror(errno));
    comm.put(stream, window, 0, 0, src.data(), kBytes);
    comm.signal(stream, 0, 0);
    Stopwatch watch;
    const auto error = stream_error(stream, 4 * timeout);
    CHILD_CHECK(::kill(receiver, SIGCONT) == 0, "SIGCONT: ", std::strerror(errno));
    std::fprintf(stderr, "rank 1: the put failed after %.2f s: %s\n", watch.seconds(),
                 error ? error->second.c_str() : "(no error)");
    // Timeout when the put gave up first, Peer when the transport failed the peer for making no progress first.
    CHILD_CHECK(error && (error->first == ErrorCode::Timeout || error->first == ErrorCode::Peer),
                "the stream did not report the failed put");
    CHILD_CHECK(contains(error, cat("rank 1 -> peer 0: ", put_text)), error->second);
    const auto put = call_error([&] { comm.put(stream, window, 0, 0, src.data(), 8); });
    CHILD_CHECK(put && put->first == ErrorCode::Peer && contains(put, "rank 1 -> peer 0: put of 8 bytes"),
                put ? put->second : "a later put was accepted");
    const auto signal = call_error([&] { comm.signal(stream, 0, 0); });
    CHILD_CHECK(signal && signal->first == ErrorCode::Peer && contains(signal, "rank 1 -> peer 0: signal"),
                signal ? signal->second : "a later signal was accepted");
  }
  comm.barrier();
  return 0;
}

// A send of rank 1 to rank 0 whose RMA write the transport refuses: the test hook PICKLE_TEST_FAIL_NET_WRITE=args[1],
// set on rank 1 only, makes its transport's n-th write throw, as a source registration that verbs or efa refuse
// would (tcp registers no sources). args[2] "alone": that write is the send's first, so nothing of it was written,
// and the send and its receive fail while the pair goes on (a second send of the same tag arrives intact). "pair":
// it is a later piece of a staged send whose earlier piece left, and the pair fails on both sides. Either way the
// sender's Request fails naming the send and the cause, a stream waiting for the send goes on (and its synchronize
// throws the send's error), and the receiver's receive fails within seconds, as does a stream waiting for it (before:
// the Request waited until PICKLE_TIMEOUT and the streams for ever, and the receiver heard nothing).
PICKLE_CHILD(net_send_write_fails) {
  const int rank = std::stoi(env::foreign("RANK").value());
  if (rank == 1) ::setenv("PICKLE_TEST_FAIL_NET_WRITE", args.at(1).c_str(), 1);  // before the transport reads it
  const bool pair_fails = args.at(2) == "pair";
  const double timeout = env::timeout_seconds();
  Communicator comm = make_comm(args.at(0));
  constexpr std::size_t kBytes = (8u << 20) + 4321;  // three pieces (4 MiB each, comm/net_pieces.hpp)
  constexpr int kTag = 7;
  const std::string send_text = cat("rank 1 -> peer 0: send of ", kBytes, " bytes (tag ", kTag, ")");
  const std::string hook_text = cat("refused by the test hook PICKLE_TEST_FAIL_NET_WRITE=", args.at(1));
  Buffer data = comm.alloc(kBytes);
  Stream stream = comm.make_stream();
  if (rank == 0) {
    Request recv = comm.recv(1, kTag, data.data(), kBytes);
    recv.on_stream(stream);
    Stopwatch watch;
    const auto error = call_error([&] { recv.wait(); });
    std::fprintf(stderr, "rank 0: the receive ended after %.2f s: %s\n", watch.seconds(),
                 error ? error->second.c_str() : "without an error");
    CHILD_CHECK(error && error->first == ErrorCode::Peer, "the receive of a send that failed did not fail");
    CHILD_CHECK(contains(error, cat("rank 0 -> peer 1: recv of ", kBytes, " bytes")) && contains(error, send_text) &&
                    contains(error, hook_text) && contains(error, pair_fails ? "failed partway" : "failed: "),
                error->second);
    CHILD_CHECK(watch.seconds() < timeout / 2, "the receive took ", watch.seconds(), " s to fail");
    // The stream waiting for it went on, and reports the receive's failure (Request::on_stream's check).
    const auto waited = stream_error(stream, timeout / 2);
    CHILD_CHECK(waited && waited->second == error->second, "a stream waiting for the failed receive: ",
                waited ? waited->second : "no error");
    if (pair_fails) {
      // Nothing of the failed receive writes into its buffer once it reported the failure: not a piece's write
      // (the pair's endpoints are closed), nor, staged, a queued copy of a piece that had landed (the failure waits
      // for those). The buffer is ours again: a pattern written now must stay.
      fill(comm, data.data(), kBytes, 33);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const std::size_t overwritten = count_wrong(comm, data.data(), kBytes, 33);
      CHILD_CHECK(overwritten == 0, overwritten, " bytes of the failed receive's buffer changed after it failed");
      const auto later = call_error([&] { comm.recv(1, kTag, data.data(), kBytes); });
      CHILD_CHECK(later && later->first == ErrorCode::Peer && contains(later, "rank 0 -> peer 1: recv"),
                  later ? later->second : "a later receive was accepted");
    } else {
      comm.recv(1, kTag, data.data(), kBytes).wait();
      const std::size_t wrong = count_wrong(comm, data.data(), kBytes, 32);
      CHILD_CHECK(wrong == 0, "the send after the failed one: ", wrong, " bytes wrong");
    }
  } else {
    fill(comm, data.data(), kBytes, 31);
    // The send's write waits on `stream` for this gate, so that a stream is waiting for the send when it fails.
    Buffer gate_memory = comm.alloc(sizeof(std::uint32_t));
    auto* gate = static_cast<std::uint32_t*>(gate_memory.data());
    *gate = 0;
    stream.impl().wait_value(gate, 1);
    Request send = comm.send(0, kTag, data.data(), kBytes, &stream);
    Stream waiter = comm.make_stream();
    send.on_stream(waiter);  // returns once rank 0's receive matched the send
    std::atomic_ref<std::uint32_t>(*gate).store(1, std::memory_order_release);
    Stopwatch watch;
    const auto error = call_error([&] { send.wait(); });
    std::fprintf(stderr, "rank 1: the send ended after %.2f s: %s\n", watch.seconds(),
                 error ? error->second.c_str() : "without an error");
    // The cause's code (System, from the hook), with the send's context in front of the transport's.
    CHILD_CHECK(error && error->first == ErrorCode::System, "the send whose write was refused did not fail");
    CHILD_CHECK(contains(error, send_text + ": rank 1 -> peer 0: net write of ") && contains(error, hook_text),
                error->second);
    CHILD_CHECK(watch.seconds() < timeout / 2, "the send took ", watch.seconds(), " s to fail");
    const auto waited = stream_error(waiter, timeout / 2);
    CHILD_CHECK(waited && waited->second == error->second, "a stream waiting for the failed send: ",
                waited ? waited->second : "no error");
    // The failure shows in the Request, the send's own report, not also on the stream it was issued from.
    const auto issued = stream_error(stream, timeout / 2);
    CHILD_CHECK(!issued, "the send's stream: ", issued->second);
    if (pair_fails) {
      const auto later = call_error([&] { comm.send(0, kTag, data.data(), 8); });
      CHILD_CHECK(later && later->first == ErrorCode::Peer && contains(later, "rank 1 -> peer 0: send of 8 bytes"),
                  later ? later->second : "a later send was accepted");
    } else {
      fill(comm, data.data(), kBytes, 32);
      comm.send(0, kTag, data.data(), kBytes, &stream).wait();
    }
  }
  comm.barrier();
  return 0;
}

}  // namespace pickle::test
