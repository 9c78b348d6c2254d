// The raw copy engine as `pickle bench interference`'s background (`--backend ce`), where it can run without GPUs:
// two real rank processes on host memory (the host stream's memcpy stands in for the copy engine), joined through the
// store, map each other's memory as the bench's ranks do and keep a ring of messages in flight with the bench's own
// TrafficRunner, halted and drained by its stop protocol. Rank 1 then counts, with the bench's pattern check, the
// bytes that differ from rank 0's pattern: none, except the one byte rank 0 flipped in its send buffer for one row
// (the check sees what the copies delivered, not a buffer left alone). Under allgather, or between two hosts, the
// backend is unavailable, saying why; the command accepts `ce` and refuses it with --lanes. The suite as a whole
// needs GPUs (tests/cuda/test_bench_interference_cuda.cpp runs ce rows there).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "../../tools/pickle/bench/interference_options.hpp"
#include "../../tools/pickle/bench/interference_runner.hpp"
#include "../../tools/pickle/bench/interference_traffic.hpp"
#include "../../tools/pickle/bench/interference_window.hpp"
#include "../../tools/pickle/bench/pattern.hpp"
#include "bench_test_util.hpp"
#include "core/clock.hpp"
#include "core/format.hpp"
#include "core/json.hpp"
#include "device/memory.hpp"
#include "rank_statuses.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

/// The rows each rank runs, in order: a size that is no multiple of 8, a small one whose middle byte rank 0 flips
/// in its send buffer first, then the first size again with the byte restored (sequence numbers run on across rows).
constexpr std::size_t kLarge = (std::size_t{1} << 20) + 3;
constexpr std::size_t kSmall = 4097;
constexpr std::size_t kRowBytes[] = {kLarge, kSmall, kLarge};
constexpr std::size_t kFlippedRow = 1;
/// Each row runs until each rank completed this many messages, as the bench's steady state does (2 x depth and more).
constexpr std::uint64_t kMessagesPerRow = 64;
constexpr int kDepth = 4;
constexpr std::chrono::milliseconds kSenderLate{100};

/// Waits until `runner` completed `messages`, rethrowing its failure; TimeoutError after 30 s.
void run_until(bench::TrafficRunner& runner, std::uint64_t messages) {
  const Deadline deadline = Deadline::after_seconds(30);
  while (runner.completed() < messages) {
    runner.rethrow_failure();
    if (deadline.expired()) throw TimeoutError(cat("only ", runner.completed(), " messages completed"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// One rank of the ce background on host memory; writes what it measured to <args[0]>/rank<r>.json.
PICKLE_CHILD(interference_ce_host) {
  Store store(discover_rank_info());
  const int rank = store.self().rank;
  std::unique_ptr<device::Allocation> send, recv;
  if (rank == 0) {
    send = device::allocate(MemoryKind::Host, kLarge);
    bench::fill_source(0, 0, static_cast<std::uint8_t*>(send->data()), kLarge);  // the bench's pattern of rank 0
  } else {
    recv = device::allocate(MemoryKind::Host, kLarge);
  }
  void* send_ptr = send ? send->data() : nullptr;
  void* recv_ptr = recv ? recv->data() : nullptr;
  auto traffic = bench::make_ce_traffic("p2p", {.ranks = 2, .local_ranks = 2}, MemoryKind::Host);
  traffic->probe();
  const bench::TrafficBuffers buffers{.send = send_ptr, .recv = recv_ptr, .send_bytes = send ? kLarge : 0,
                                      .recv_bytes = recv ? kLarge : 0};
  traffic->setup(store, rank, 0, buffers);

  json::Value rows = json::Value::array();
  for (std::size_t row = 0; row < std::size(kRowBytes); ++row) {
    const std::size_t bytes = kRowBytes[row];
    auto* flip = static_cast<std::uint8_t*>(send_ptr) + kSmall / 2;
    if (rank == 0 && (row == kFlippedRow || row == kFlippedRow + 1)) *flip = static_cast<std::uint8_t>(~*flip);
    if (rank == 1) std::memset(recv_ptr, bench::kPoisonByte, bytes);
    store.barrier(cat("row ", row));
    bench::TrafficRunner runner(*traffic, send_ptr, recv_ptr, bytes, kDepth, -1, cat("rank ", rank, " ce row ", row),
                                20);
    // Rank 0 starts late: rank 1's messages may complete only once they landed, not when its waits were posted.
    if (rank == 0) std::this_thread::sleep_for(kSenderLate);
    const std::int64_t started_ns = now_ns();
    runner.start();
    run_until(runner, kMessagesPerRow);
    // The bench's stop: each side halts, they agree on the larger count, both post up to it and wait for all.
    const std::uint64_t posted = runner.halt();
    store.set(cat("posted ", row, " ", rank), cat(posted));
    const std::uint64_t peer = std::stoull(store.get_string(cat("posted ", row, " ", 1 - rank)));
    const std::uint64_t target = bench::drain_target(posted, peer);
    runner.drain(target, Deadline::after_seconds(30));
    const auto& done = runner.completions();
    json::Value r = json::Value::object();
    r["bytes"] = static_cast<std::int64_t>(bytes);
    r["target"] = static_cast<std::int64_t>(target);
    r["completed"] = static_cast<std::int64_t>(done.size());
    r["in_order"] = std::is_sorted(done.begin(), done.end());
    r["started_ns"] = started_ns;
    r["first_ns"] = runner.first_completion_ns();
    r["wrong"] = rank == 1 ? static_cast<std::int64_t>(bench::count_wrong(static_cast<std::uint8_t*>(recv_ptr), bytes,
                                                                          0, 0))
                           : std::int64_t{0};
    rows.push_back(std::move(r));
  }

  // A post from or into a buffer other than the mapped one is refused before anything is enqueued.
  std::vector<std::uint8_t> elsewhere(64);
  std::string refused;
  try {
    traffic->post(elsewhere.data(), elsewhere.data(), elsewhere.size());
  } catch (const InvalidArgument& e) {
    refused = e.what();
  }
  store.barrier("rows done");
  traffic.reset();  // rank 1 frees its flag only once rank 0 unmapped it (through the store)

  json::Value out = json::Value::object();
  out["rank"] = rank;
  out["rows"] = std::move(rows);
  out["refused"] = refused;
  std::ofstream(args.at(0) + "/rank" + std::to_string(rank) + ".json") << out.dump();
  store.barrier("written");
  return 0;
}

TEST(InterferenceCe, HostMemoryCopiesLandExactlyAndEverySendMeetsAWait) {
  TempDir dir("interference-ce");
  expect_all_ok(run_ranks("interference_ce_host", 2, {dir.str()}, {"PICKLE_TIMEOUT=30"}, std::chrono::seconds(90)));
  const json::Value zero = json::parse(read_file(dir / "rank0.json"));
  const json::Value one = json::parse(read_file(dir / "rank1.json"));
  ASSERT_EQ(zero.at("rows").size(), std::size(kRowBytes));
  ASSERT_EQ(one.at("rows").size(), std::size(kRowBytes));
  for (std::size_t row = 0; row < std::size(kRowBytes); ++row) {
    const json::Value sent = zero.at("rows").at(row);
    const json::Value received = one.at("rows").at(row);
    const std::string where = cat("row ", row, " (", kRowBytes[row], " bytes)");
    EXPECT_EQ(received.at("bytes").as_int(), static_cast<std::int64_t>(kRowBytes[row])) << where;
    // Both sides completed every message up to the agreed count, which is at least what each ran to.
    EXPECT_EQ(sent.at("target").as_int(), received.at("target").as_int()) << where;
    EXPECT_GE(received.at("target").as_int(), static_cast<std::int64_t>(kMessagesPerRow)) << where;
    EXPECT_EQ(sent.at("completed").as_int(), sent.at("target").as_int()) << where;
    EXPECT_EQ(received.at("completed").as_int(), received.at("target").as_int()) << where;
    EXPECT_TRUE(sent.at("in_order").as_bool()) << where;
    EXPECT_TRUE(received.at("in_order").as_bool()) << where;
    // Rank 1's first message completed after rank 0 started sending (both read the host's monotonic clock).
    EXPECT_GE(received.at("first_ns").as_int(), sent.at("started_ns").as_int()) << where;
    // The receive buffer was poisoned before the row: only rank 0's copies can have put its pattern there.
    EXPECT_EQ(received.at("wrong").as_int(), row == kFlippedRow ? 1 : 0) << where;
  }
  for (const json::Value& rank : {zero, one}) {
    EXPECT_NE(rank.at("refused").as_string().find("is not the one mapped at set-up"), std::string::npos)
        << "rank " << rank.at("rank").as_int() << ": '" << rank.at("refused").as_string() << "'";
  }
}

TEST(InterferenceCe, AllgatherAndTwoHostsAreUnavailableSayingWhy) {
  auto probe_error = [](std::string_view background, bench::TrafficRanks ranks) {
    auto traffic = bench::make_ce_traffic(background, ranks, MemoryKind::Host);
    EXPECT_EQ(traffic->backend(), "ce");
    try {
      traffic->probe();
    } catch (const UnavailableError& e) {
      return std::string(e.what());
    }
    return std::string("no UnavailableError");
  };
  const std::string allgather = probe_error("allgather", {.ranks = 4, .local_ranks = 4});
  EXPECT_NE(allgather.find("the raw copy engine is a p2p background only"), std::string::npos) << allgather;
  const std::string hosts = probe_error("p2p", {.ranks = 2, .local_ranks = 1});
  EXPECT_NE(hosts.find("ranks 0 and 1 are on different hosts"), std::string::npos) << hosts;
  EXPECT_EQ(probe_error("p2p", {.ranks = 2, .local_ranks = 2}), "no UnavailableError");
}

TEST(InterferenceCe, TheCommandTakesCeByNameAndNotWithLanes) {
  EXPECT_EQ(bench::parse_interference_options({}).backends, (std::vector<std::string>{"pickle", "nccl"}));
  EXPECT_EQ(bench::parse_interference_options({"--backend", "pickle,nccl,ce"}).backends,
            (std::vector<std::string>{"pickle", "nccl", "ce"}));

  TempDir dir("interference-ce");
  const std::string json_path = dir / "result.json";
  BenchRun waived = run_bench(dir, "interference", {"--backend", "pickle,nccl,ce", "--json", json_path},
                              {"CUDA_VISIBLE_DEVICES="});
  ASSERT_TRUE(waived.status.ok()) << waived.describe();
  const json::Value root = json::parse(read_file(json_path));
  ASSERT_EQ(root.at("options").at("backends").size(), 3u);
  EXPECT_EQ(root.at("options").at("backends").at(2).as_string(), "ce");

  BenchRun lanes =
      run_bench(dir, "interference", {"--lanes", "1", "--backend", "pickle,ce"}, {"CUDA_VISIBLE_DEVICES="});
  EXPECT_TRUE(lanes.status.exited && lanes.status.code == 2) << lanes.describe();
  EXPECT_NE(lanes.err.find("--lanes: the ce backend has no network path"), std::string::npos) << lanes.err;
  EXPECT_TRUE(lanes.out.empty()) << lanes.out;

  BenchRun help = run_bench(dir, "interference", {"--help"}, {"CUDA_VISIBLE_DEVICES="});
  EXPECT_NE(help.out.find("  ce         the raw copy engine"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace pickle::test
