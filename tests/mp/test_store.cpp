// The bootstrap store between real processes: every rank sets distinct data and reads everyone's back byte for
// byte, counts, meets at barriers and allgathers, with 2, 4 and 8 ranks. The child functions defined here are also
// used by test_store_faults.cpp.

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

using namespace std::chrono_literals;

/// Deterministic bytes that differ with the seed and along the buffer, so that a misplaced or shifted byte shows.
std::vector<std::byte> pattern(int seed, std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<std::byte>((i * 131 + static_cast<std::size_t>(seed) * 7 + (i >> 8)) & 0xFF);
  }
  return bytes;
}

std::vector<std::byte> bytes_of(const std::string& text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

/// Throws (the child then exits non-zero with the message) when a check fails.
void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

/// Writes "ok", or the error's code name and message, to `path`: how a child reports an expected failure.
int record_outcome(const std::string& path, const std::function<void()>& body) {
  std::string outcome = "ok";
  try {
    body();
  } catch (const Error& e) {
    outcome = cat(error_code_name(e.code()), "\n", e.what());
  }
  std::ofstream(path) << outcome;
  return 0;
}

/// Waits for a file that the parent creates to let the ranks go on.
void wait_for_file(const std::string& path) {
  Deadline deadline(30s);
  while (!std::filesystem::exists(path)) {
    require(!deadline.expired(), "the parent never created " + path);
    std::this_thread::sleep_for(10ms);
  }
}

/// Every operation, checked byte for byte.
void exercise_store(Store& store) {
  const int rank = store.self().rank;
  const int world = store.self().world_size;
  auto size_of = [](int r) { return static_cast<std::size_t>(1000 + 37 * r); };

  store.set(cat("value/", rank), pattern(rank, size_of(rank)));
  for (int peer = 0; peer < world; ++peer) {
    require(store.get(cat("value/", peer)) == pattern(peer, size_of(peer)), cat("value/", peer, " read by rank ", rank));
  }
  std::vector<std::string> keys;
  for (int peer = 0; peer < world; ++peer) keys.push_back(cat("value/", peer));
  store.wait(keys);
  require(store.check("value/0"), "check of a key that is set");
  require(!store.check("never/set"), "check of a key that is not set");

  // Each rank adds rank + 1 once: after the barrier every rank sees the full sum.
  store.add("counter", rank + 1);
  store.barrier("counted");
  require(store.get_string("counter") == std::to_string(world * (world + 1) / 2), "counter after the barrier");
  require(store.add("counter", 0) == world * (world + 1) / 2, "add of 0 returns the current value");

  auto blobs = store.allgather(pattern(100 + rank, static_cast<std::size_t>(10 * rank + 1)));
  require(blobs.size() == static_cast<std::size_t>(world), "allgather returns one blob per rank");
  for (int peer = 0; peer < world; ++peer) {
    require(blobs[static_cast<std::size_t>(peer)] == pattern(100 + peer, static_cast<std::size_t>(10 * peer + 1)),
            cat("allgather blob of rank ", peer));
  }
  // A second allgather of the same shape is a new round, not a replay of the first.
  auto names = store.allgather(bytes_of(cat("rank-", rank)));
  for (int peer = 0; peer < world; ++peer) require(names[static_cast<std::size_t>(peer)] == bytes_of(cat("rank-", peer)), "second allgather");

  // A value of a few MiB from rank 0 to everyone, and a key overwritten by every rank in turn.
  if (rank == 0) store.set("big", pattern(7, 4u << 20));
  require(store.get("big") == pattern(7, 4u << 20), "4 MiB value");
  for (int turn = 0; turn < world; ++turn) {
    if (turn == rank) store.set("turn", cat("written by ", rank));
    store.barrier("turn");
    require(store.get_string("turn") == cat("written by ", turn), cat("turn ", turn));
    store.barrier("turn");
  }
  store.barrier();
}

PICKLE_CHILD(store_basic) {
  Store store(discover_rank_info());
  exercise_store(store);
  return 0;
}

/// Rank 1 asks for a key that rank 0 sets 300 ms later: the get must block, then return the value.
PICKLE_CHILD(store_late_get) {
  Store store(discover_rank_info());
  const int rank = store.self().rank;
  require(!store.check("late"), "the key is not set yet");
  // Rank 1's clock starts before the barrier: rank 0 cannot leave it before rank 1 entered, so the key comes at least
  // 300 ms after this point however late rank 1 itself wakes up from the barrier.
  Stopwatch watch;
  store.barrier("start");
  if (rank == 0) {
    std::this_thread::sleep_for(300ms);
    store.set("late", "arrived");
  } else {
    std::string value = store.get_string("late");
    require(value == "arrived", "value of the late key");
    require(watch.seconds() >= 0.25, cat("get returned after ", watch.seconds(), " s, before the key was set"));
  }
  store.barrier("end");
  return 0;
}

/// Two threads of rank 1 use the store at once: one waits in a get for a key that rank 0 sets only after the other
/// thread's set arrived. Over one shared connection the set queued behind the get until the timeout.
PICKLE_CHILD(store_threads) {
  Store store(discover_rank_info());
  if (store.self().rank == 0) {
    store.wait({"from-rank-1"});
    store.set("from-rank-0", "answer");
  } else {
    std::string got;
    std::thread waiter([&] { got = store.get_string("from-rank-0"); });
    std::this_thread::sleep_for(200ms);  // the get is parked on the store by now
    store.set("from-rank-1", "question");
    waiter.join();
    require(got == "answer", cat("the waiting thread got '", got, "'"));
  }
  // Several threads at once, each with its own keys, and barriers from both threads of each rank in turn.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      const int rank = store.self().rank, other = 1 - rank;
      for (int i = 0; i < 20; ++i) {
        store.set(cat("t", t, "/r", rank, "/", i), cat(i * 7 + t));
        require(store.get_string(cat("t", t, "/r", other, "/", i)) == cat(i * 7 + t), "a thread's value");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  store.barrier("end");
  return 0;
}

/// args: scenario, result file [, go file]. Records the outcome of one scenario in the result file.
PICKLE_CHILD(store_scenario) {
  const std::string scenario = args.at(0);
  const std::string result = args.at(1);
  if (scenario == "join") {
    return record_outcome(result, [] { Store store(discover_rank_info()); });
  }
  if (scenario == "barrier") {
    return record_outcome(result, [] {
      Store store(discover_rank_info());
      store.barrier("after-join");
    });
  }
  if (scenario == "join_then_sleep") {
    // Joins, reports that it did, and waits to be killed by the parent.
    Store store(discover_rank_info());
    std::ofstream(result) << "joined";
    std::this_thread::sleep_for(60s);
    return 3;
  }
  if (scenario == "ops_after_go") {
    // Joins, reports it, waits until the parent says go (after it disturbed the store), then uses the store.
    const std::string go = args.at(2);
    return record_outcome(result, [&] {
      Store store(discover_rank_info());
      std::ofstream(result + ".joined") << "joined";
      wait_for_file(go);
      exercise_store(store);
    });
  }
  std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
  return 2;
}

std::vector<std::string> env_for(int rank, int world, int port, const std::string& timeout) {
  auto env = rank_env(rank, world, port);
  env.push_back("PICKLE_TIMEOUT=" + timeout);
  return env;
}

class StoreRanks : public testing::TestWithParam<int> {};

TEST_P(StoreRanks, SetGetWaitAddBarrierAllgatherCheckedByteForByte) {
  const int world = GetParam();
  const int port = free_tcp_port();
  std::vector<Child> ranks;
  // Rank 0 starts last, so that the others exercise the connect retry.
  for (int r = world - 1; r >= 0; --r) ranks.emplace_back("store_basic", std::vector<std::string>{}, env_for(r, world, port, "30"));
  for (auto& child : ranks) {
    ExitStatus status = child.wait(60s);
    EXPECT_TRUE(status.ok()) << "a rank " << status.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Store, StoreRanks, testing::Values(2, 4, 8),
                         [](const testing::TestParamInfo<int>& param) { return cat(param.param, "ranks"); });

TEST(Store, GetBlocksUntilAnotherRankSetsTheKey) {
  const int port = free_tcp_port();
  Child rank0("store_late_get", {}, env_for(0, 2, port, "30"));
  Child rank1("store_late_get", {}, env_for(1, 2, port, "30"));
  EXPECT_TRUE(rank1.wait(30s).ok());
  EXPECT_TRUE(rank0.wait(30s).ok());
}

TEST(Store, AHugeTimeoutMeansALongWaitNotAnInstantFailure) {
  // PICKLE_TIMEOUT=1e9 ("forever", while debugging) once wrapped around in the milliseconds sent with each wait:
  // the rendezvous of a rank 300 ms late, and the get of a key set 300 ms later, failed at once.
  const int port = free_tcp_port();
  Child rank0("store_late_get", {}, env_for(0, 2, port, "1e9"));
  std::this_thread::sleep_for(300ms);
  Child rank1("store_late_get", {}, env_for(1, 2, port, "1e9"));
  EXPECT_TRUE(rank1.wait(30s).ok());
  EXPECT_TRUE(rank0.wait(30s).ok());
}

TEST(Store, ThreadsOfOneRankDoNotWaitBehindEachOther) {
  const int port = free_tcp_port();
  Child rank0("store_threads", {}, env_for(0, 2, port, "10"));
  Child rank1("store_threads", {}, env_for(1, 2, port, "10"));
  // Before: rank 1's get held the connection until its 10 s timeout, and the rank failed.
  EXPECT_TRUE(rank1.wait(30s).ok());
  EXPECT_TRUE(rank0.wait(30s).ok());
}

TEST(Store, WorldOfOneInProcess) {
  RankInfo self;  // rank 0 of 1, any free port
  Store store(self, Store::Options{.timeout_seconds = 5, .token = ""});
  EXPECT_GT(store.self().master_port, 0);
  store.set("k", "v");
  EXPECT_EQ(store.get_string("k"), "v");
  EXPECT_EQ(store.add("n", 41), 41);
  EXPECT_EQ(store.add("n", 1), 42);
  store.barrier("b");
  auto blobs = store.allgather(bytes_of("mine"));
  ASSERT_EQ(blobs.size(), 1u);
  EXPECT_EQ(blobs[0], bytes_of("mine"));
  EXPECT_THROW(store.set(std::string(5000, 'k'), "v"), InvalidArgument);
  // A barrier name that fits a key but not the framing around it: refused here, and the store keeps working (the
  // server used to reject the frame and drop this rank).
  EXPECT_THROW(store.barrier(std::string(4090, 'b')), InvalidArgument);
  store.barrier("after a refused name");
  EXPECT_THROW(store.add("k", 1), InvalidArgument);  // "v" is not an integer
}

TEST(Store, GetOfAKeyNobodySetsTimesOutNamingTheKey) {
  Store store(RankInfo{}, Store::Options{.timeout_seconds = 0.3, .token = ""});
  Stopwatch watch;
  try {
    store.get("nobody/sets/this");
    ADD_FAILURE() << "get returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0: store get 'nobody/sets/this': key 'nobody/sets/this' was not set"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(watch.seconds(), 2.0);
  // The connection is still in step: the next request works.
  store.set("after", "timeout");
  EXPECT_EQ(store.get_string("after"), "timeout");
}

}  // namespace
}  // namespace pickle::test
