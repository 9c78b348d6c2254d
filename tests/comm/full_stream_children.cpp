// Rank programs around a stream whose queue is full (host memory on CPU, CUDA memory on GPUs).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "comm_children.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "subprocess.hpp"

namespace pickle::test {

// A send matched at call time joins the caller's stream, and queuing on a stream whose queue is full waits until the
// stream has run some of it. Here the stream first waits (a gate) for a signal of the peer, which reaches this rank
// through its progress thread: a send that queued its operations while holding the communicator's lock stopped that
// thread, so the gate never opened and the rank hung (net: the writes and the completion go from host callbacks on
// the stream). Rank 0 fills its stream behind the gate with signals to rank 1 (each a host callback: on a GPU two
// stream operations, and a CUDA stream's queue holds about a thousand; a host stream's as many,
// PICKLE_HOST_STREAM_DEPTH) until the filling thread blocks, then sends on
// the same stream; once the send is under way it tells rank 1 (a file in `folder`) to open the gate. Rank 1 checks the
// data and that every signal arrived. With `when` = "posted" rank 1's receive is posted first, so that the send is
// matched at call time and queues its copy; with "late" rank 1 posts it after opening the gate, so that the send
// records an event on the full stream (for its copy, queued once the receive is posted). args: memory kind, a folder
// both ranks see, when.
PICKLE_CHILD(comm_send_on_a_full_stream) {
  Communicator comm = make_comm(args.at(0));
  const std::filesystem::path open_gate = std::filesystem::path(args.at(1)) / "open-the-gate";
  const bool posted_first = args.at(2) == "posted";
  constexpr std::size_t kBytes = (1 << 20) + 3;
  constexpr int kSignals = 4000, kTag = 6;
  Buffer data = comm.alloc(kBytes);
  Stream stream = comm.make_stream();
  const Deadline deadline = Deadline::after_seconds(env::timeout_seconds());
  if (comm.rank() == 0) {
    fill(comm, data.data(), kBytes, 91);
    const std::size_t heard = posted_first ? await_posted_receives(comm, 1, kTag, 1, env::timeout_seconds())
                                           : comm.posted_receives(1, kTag);
    CHILD_CHECK(heard == (posted_first ? 1u : 0u), "rank 1's receive ",
                posted_first ? "never arrived" : "came before the gate opened");
    comm.wait(stream, 1, 0, 1);  // the gate
    std::atomic<int> queued{0};
    std::thread filler([&] {
      for (int i = 0; i < kSignals; ++i) {
        comm.signal(stream, 1, 1);
        queued.fetch_add(1);
      }
    });
    // The filler is blocked once its count stays put for 300 ms short of the end.
    int seen = -1;
    auto still_since = std::chrono::steady_clock::now();
    const auto still_for = [&] { return std::chrono::steady_clock::now() - still_since; };
    while (queued.load() < kSignals && still_for() < std::chrono::milliseconds(300)) {
      if (queued.load() != seen) {
        seen = queued.load();
        still_since = std::chrono::steady_clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const int before_send = queued.load();
    std::fprintf(stderr, "rank 0: %d of %d signals queued behind the gate when the send came\n", before_send, kSignals);
    if (before_send == kSignals) {
      // The send would not wait, and this program would test nothing. (The filler is done: no thread left running.)
      filler.join();
      CHILD_CHECK(false, "the stream's queue took all ", kSignals, " signals without blocking");
    }
    std::atomic<bool> sending{false};
    std::thread opener([&] {
      while (!sending.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the send is blocked in its queuing by now
      std::ofstream(open_gate) << "open\n";
    });
    sending = true;
    Request request = comm.send(1, kTag, data.data(), kBytes, &stream);
    opener.join();
    filler.join();
    request.wait();
    stream.synchronize();
  } else {
    std::optional<Request> request;
    if (posted_first) request = comm.recv(0, kTag, data.data(), kBytes);
    while (!std::filesystem::exists(open_gate) && !deadline.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHILD_CHECK(std::filesystem::exists(open_gate), "rank 0 never got to its send within ", env::timeout_seconds(),
                " s");
    comm.signal(stream, 0, 0);
    if (!posted_first) request = comm.recv(0, kTag, data.data(), kBytes);
    request->wait();
    comm.wait(stream, 0, 1, kSignals);
    stream.synchronize();
    const std::size_t wrong = count_wrong(comm, data.data(), kBytes, 91);
    CHILD_CHECK(wrong == 0, wrong, " wrong bytes");
  }
  comm.barrier();
  return 0;
}

// Sends matched on the progress thread queue their copies on the pair's copy stream, each behind an event of the
// caller's stream; when that stream waits (a gate) for a signal of the peer, the copy stream stops at the first of
// them, and with enough sends its queue fills. The thread that queues them then waits for the stream; were it the
// progress thread, which delivers the gate's signal, the rank would hang. Rank 0 queues `count` sends behind the
// closed gate before rank 1 posts any receive; rank 1 posts them all, waits half a second (the matches pile up), then
// opens the gate and checks every message. args: memory kind, count.
PICKLE_CHILD(comm_sends_matched_late_behind_a_gate) {
  Communicator comm = make_comm(args.at(0));
  const int count = std::stoi(args.at(1));
  constexpr std::size_t kBytes = 4096;
  constexpr int kTag = 7;
  Buffer data = comm.alloc(kBytes * static_cast<std::size_t>(count));
  auto message = [&](int i) { return static_cast<char*>(data.data()) + static_cast<std::size_t>(i) * kBytes; };
  Stream stream = comm.make_stream();
  std::vector<Request> requests;
  if (comm.rank() == 0) {
    fill_messages(comm, data.data(), count, kBytes, 300);
    comm.wait(stream, 1, 0, 1);  // the gate
    for (int i = 0; i < count; ++i) requests.push_back(comm.send(1, kTag, message(i), kBytes, &stream));
    CHILD_CHECK(comm.posted_receives(1, kTag) == 0, "a receive came before the sends were queued");
    comm.barrier();  // now rank 1 posts
  } else {
    comm.barrier();
    for (int i = 0; i < count; ++i) requests.push_back(comm.recv(0, kTag, message(i), kBytes));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    comm.signal(stream, 0, 0);
  }
  for (auto& request : requests) request.wait();
  stream.synchronize();
  if (comm.rank() == 1) {
    const std::string wrong = first_wrong_message(comm, data.data(), count, kBytes, 300);
    CHILD_CHECK(wrong.empty(), wrong);
  }
  comm.barrier();
  return 0;
}

// A pair whose late-matched sends are held up must not hold up another pair's. Rank 0 queues `count` sends to rank 1
// behind a gate that opens on rank 2's signal, and one send to rank 2 on a stream of its own, all before any receive
// is posted. Rank 1 posts its receives: the sends' stream work fills rank 0's copy stream for rank 1, and the thread
// that queues it waits there. Half a second later rank 2 posts its receive, and opens the gate only once the message
// arrived. A single thread queuing every pair's late matches would hold rank 2's send behind rank 1's: no message
// would ever arrive (a timeout). Ranks 1 and 2 check their data. args: memory kind, count.
PICKLE_CHILD(comm_late_matches_of_a_held_pair_do_not_hold_another) {
  Communicator comm = make_comm(args.at(0));
  CHILD_CHECK(comm.world_size() == 3, "three ranks, not ", comm.world_size());
  const int count = std::stoi(args.at(1));
  constexpr std::size_t kBytes = 4096;
  constexpr int kTag = 8;
  Buffer data = comm.alloc(kBytes * static_cast<std::size_t>(count));
  auto message = [&](int i) { return static_cast<char*>(data.data()) + static_cast<std::size_t>(i) * kBytes; };
  Stream gated = comm.make_stream(), free_running = comm.make_stream();
  std::vector<Request> requests;
  if (comm.rank() == 0) {
    fill_messages(comm, data.data(), count, kBytes, 500);
    comm.wait(gated, 2, 0, 1);  // the gate
    for (int i = 0; i < count; ++i) requests.push_back(comm.send(1, kTag, message(i), kBytes, &gated));
    requests.push_back(comm.send(2, kTag, message(0), kBytes, &free_running));
    CHILD_CHECK(comm.posted_receives(1, kTag) == 0 && comm.posted_receives(2, kTag) == 0,
                "a receive came before the sends were queued");
    comm.barrier();  // now the receives
  } else if (comm.rank() == 1) {
    comm.barrier();
    for (int i = 0; i < count; ++i) requests.push_back(comm.recv(0, kTag, message(i), kBytes));
  } else {
    comm.barrier();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1's matches fill rank 0's copy stream
    Request request = comm.recv(0, kTag, message(0), kBytes);
    request.wait();
    const std::size_t wrong = count_wrong(comm, message(0), kBytes, 500);
    CHILD_CHECK(wrong == 0, "rank 2's message: ", wrong, " wrong bytes");
    comm.signal(free_running, 0, 0);
  }
  for (auto& request : requests) request.wait();
  gated.synchronize();
  free_running.synchronize();
  if (comm.rank() == 1) {
    const std::string wrong = first_wrong_message(comm, data.data(), count, kBytes, 500);
    CHILD_CHECK(wrong.empty(), wrong);
  }
  comm.barrier();
  return 0;
}

// A communicator destroyed while its late-matched sends are still being queued behind a gate that never opens must
// not wait for ever. Rank 0 queues `count` sends to rank 1 behind a wait for rank 1's signal, which never comes; rank
// 1 posts its receives, so that the thread queuing rank 0's matches waits on the full copy stream, and then stays
// busy (it waits for rank 0's word, a file in `folder`): no goodbye of its own releases rank 0's gate. Rank 0 destroys
// its communicator: teardown releases what the streams wait for, the gate included, before it stops that thread
// (joining it first hung), and the gated stream then reports the wait released without its signal. args: memory
// kind, a folder both ranks see, count.
PICKLE_CHILD(comm_teardown_with_late_matches_behind_a_closed_gate) {
  const std::filesystem::path rank0_done = std::filesystem::path(args.at(1)) / "rank-0-destroyed-its-communicator";
  const int count = std::stoi(args.at(2));
  constexpr std::size_t kBytes = 4096;
  constexpr int kTag = 9;
  std::optional<Stream> gated;
  Buffer data;
  int rank = -1;
  {
    Communicator comm = make_comm(args.at(0));
    rank = comm.rank();
    data = comm.alloc(kBytes * static_cast<std::size_t>(count));
    auto message = [&](int i) { return static_cast<char*>(data.data()) + static_cast<std::size_t>(i) * kBytes; };
    gated = comm.make_stream();
    std::vector<Request> requests;
    if (rank == 0) {
      fill_messages(comm, data.data(), count, kBytes, 700);
      comm.wait(*gated, 1, 0, 1);  // the gate: rank 1 never signals
      for (int i = 0; i < count; ++i) requests.push_back(comm.send(1, kTag, message(i), kBytes, &*gated));
      comm.barrier();  // now rank 1 posts
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // rank 1's posts arrive, the matches pile up
    } else {
      comm.barrier();
      for (int i = 0; i < count; ++i) requests.push_back(comm.recv(0, kTag, message(i), kBytes));
      const Deadline deadline = Deadline::after_seconds(60);  // inside the test's deadline: rank 0's failure shows
      while (!std::filesystem::exists(rank0_done) && !deadline.expired()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      CHILD_CHECK(std::filesystem::exists(rank0_done), "rank 0 did not destroy its communicator within 60 s");
      // Each receive failed, or holds its message: none may complete with other bytes (the early release of rank 0's
      // shm pair once let its ring through, and rank 1 took the stale slots for its messages).
      int completed = 0, failed = 0;
      std::string wrong;
      for (int i = 0; i < count; ++i) {
        try {
          if (!requests[static_cast<std::size_t>(i)].test()) continue;
        } catch (const Error&) {
          ++failed;
          continue;
        }
        ++completed;
        if (wrong.empty()) wrong = first_wrong_message(comm, message(i), 1, kBytes, 700 + static_cast<std::uint64_t>(i));
      }
      std::fprintf(stderr, "rank 1: %d receive(s) completed, %d failed, %d pending\n", completed, failed,
                   count - completed - failed);
      CHILD_CHECK(wrong.empty(), "a receive completed with other bytes: ", wrong);
    }
  }  // rank 0: the teardown under test; rank 1's may find its receives failed or (once the gate was released) landed
  if (rank == 0) {
    std::ofstream(rank0_done) << "done\n";
    bool released = false;
    try {
      gated->synchronize();
    } catch (const Error& e) {
      released = std::string(e.what()).find("destroyed its communicator while streams still waited") !=
                 std::string::npos;
      std::fprintf(stderr, "rank 0: the gated stream reports: %s\n", e.what());
    }
    CHILD_CHECK(released, "the gated stream's wait for rank 1's signal was not reported as released");
  }
  return 0;
}

}  // namespace pickle::test
