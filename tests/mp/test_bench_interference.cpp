// `pickle bench interference` where it can run without GPUs: the real command says it is waived (exit 0, the
// issue's exact line, a result file that records why; with --share-gpus it still needs one GPU, and an allgather of N
// ranks one per rank) with GPUs hidden, bad flags exit 2 before anything starts, and the parts of the method that are
// plain arithmetic (option parsing, the background's bandwidth inside the foreground's window, the overlap rule,
// steady state, the drain count) are checked on synthetic timestamps, and the background runner's stop protocol on
// traffic of 2 and 8 ranks simulated in-process. test_interference_rows.cpp has the N-rank plan and rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/interference_options.hpp"
#include "../../tools/pickle/bench/interference_runner.hpp"
#include "../../tools/pickle/bench/interference_traffic.hpp"
#include "../../tools/pickle/bench/interference_window.hpp"
#include "../../tools/pickle/bench/sizes.hpp"
#include "bench_test_util.hpp"
#include "core/json.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

using bench::InterferenceOptions;
using bench::parse_interference_options;
using bench::window_stats;

// Hides every GPU: the waiver then holds on any machine, GPU hosts included.
const std::string kNoGpu = "CUDA_VISIBLE_DEVICES=";
constexpr std::int64_t kMs = 1'000'000;

TEST(BenchInterference, WithoutTwoGpusItIsWaivedAndExitsZero) {
  TempDir dir("interference");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "interference", {"-n", "3", "--json", json_path}, {kNoGpu});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_EQ(run.out, "interference: waived: needs 2 CUDA GPUs (found 0)\n") << run.describe();

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("schema").as_string(), "pickle-bench/1");
  EXPECT_EQ(root.at("suite").as_string(), "interference");
  EXPECT_EQ(root.at("waived").as_string(), "needs 2 CUDA GPUs (found 0)");
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  EXPECT_EQ(root.at("results").size(), 0u);
  EXPECT_EQ(root.at("options").at("iterations").as_int(), 3);
  EXPECT_EQ(root.at("options").at("max_bytes").as_int(), 0);  // nothing was measured
  EXPECT_EQ(root.at("options").at("attention").as_string(), "auto");
  EXPECT_EQ(root.at("command").at(2).as_string(), "interference");
  EXPECT_TRUE(root.at("topology").contains("host"));
}

TEST(BenchInterference, SharingGpusStillNeedsOneAndAnAllgatherNeedsOnePerRank) {
  TempDir dir("interference");
  BenchRun shared = run_bench(dir, "interference", {"--share-gpus", "--ranks", "4"}, {kNoGpu});
  ASSERT_TRUE(shared.status.ok()) << shared.describe();
  EXPECT_EQ(shared.out, "interference: waived: needs a CUDA GPU (found 0)\n") << shared.describe();

  // Four ranks of an allgather each need a GPU: the waiver says how many, and how to run on fewer.
  BenchRun allgather = run_bench(dir, "interference", {"--background", "allgather", "--ranks", "4"}, {kNoGpu});
  ASSERT_TRUE(allgather.status.ok()) << allgather.describe();
  EXPECT_EQ(allgather.out, "interference: waived: needs 4 CUDA GPUs, one for each of the 4 ranks taking part (found "
                           "0); --share-gpus runs them round robin on fewer, as a functional check only\n")
      << allgather.describe();

  // p2p involves ranks 0 and 1 only, however many are launched.
  BenchRun p2p = run_bench(dir, "interference", {"--ranks", "4"}, {kNoGpu});
  EXPECT_EQ(p2p.out, "interference: waived: needs 2 CUDA GPUs (found 0)\n") << p2p.describe();
}

TEST(BenchInterference, UnderALauncherOnlyRankZeroSaysItIsWaived) {
  TempDir dir("interference");
  std::vector<std::string> argv = {PICKLE_CLI_PATH, "launch", "-n", "2", "--", PICKLE_CLI_PATH, "bench",
                                   "interference"};
  pid_t pid = spawn_program(argv, {kNoGpu, "PICKLE_TIMEOUT=20"}, dir / "out", dir / "err");
  ExitStatus status = wait_pid_or_kill(pid, std::chrono::seconds(60));
  std::string out = read_file(dir / "out");
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << out << "\n" << read_file(dir / "err");
  const std::string line = "[0] interference: waived: needs 2 CUDA GPUs (found 0)\n";
  std::size_t first = out.find(line);
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find("waived", first + line.size()), std::string::npos) << "only rank 0 speaks: " << out;
}

TEST(BenchInterference, BadFlagsExitWithTwoBeforeAnythingRuns) {
  const std::vector<std::vector<std::string>> cases = {
      {"--bogus"},
      {"--foreground", "gemm,conv"},
      {"--foreground", "gemm,gemm"},
      {"--attention", "bogus"},
      {"--attention"},
      {"--backend", "pickle,mpi"},
      {"--background", "broadcast"},
      {"-n", "0"},
      {"-f", "1"},
      {"-b", "2M", "-e", "1M"},
      {"-b", "4Q"},
      {"--depth", "0"},
      {"-c", "2"},
      {"--ranks", "1"},
      {"--share-gpus", "1"},  // a switch: it takes no value
      {"--memory", "host"},
      {"-e"}};
  for (const auto& args : cases) {
    TempDir dir("interference");
    BenchRun run = run_bench(dir, "interference", args, {kNoGpu});
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << args[0] << ": " << run.describe();
    EXPECT_NE(run.err.find("usage: pickle bench interference"), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << args[0] << ": " << run.out;
  }
  TempDir dir("interference");
  BenchRun run = run_bench(dir, "interference", {"--foreground", "gemm,conv"}, {kNoGpu});
  EXPECT_NE(run.err.find("--foreground: unknown item 'conv' (choose from gemm, attention)"), std::string::npos)
      << run.err;
  run = run_bench(dir, "interference", {"--attention", "flash"}, {kNoGpu});
  EXPECT_NE(run.err.find("--attention: unknown value 'flash' (choose from auto, cudnn, own)"), std::string::npos)
      << run.err;
}

TEST(BenchInterference, HelpPrintsTheUsageAndExitsZero) {
  TempDir dir("interference");
  BenchRun run = run_bench(dir, "interference", {"--help"}, {kNoGpu});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.out.find("pickle fused attention (own kernel)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("cuBLASLt bf16 8192x8192x8192"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  --share-gpus "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("--ranks 8 -b 8G -e 8G"), std::string::npos) << "seed 001 item 6's command: " << run.out;
}

TEST(InterferenceOptions, DefaultsAreTheSeedsMethod) {
  InterferenceOptions o = parse_interference_options({});
  EXPECT_EQ(o.iterations, 100);
  EXPECT_EQ(o.warmup, 20);
  EXPECT_EQ(o.min_bytes, 4096u);
  EXPECT_EQ(bench::sweep_max_bytes(o, bench::kInterferenceDefaultMaxBytes), std::size_t{16} << 30);
  EXPECT_EQ(o.factor, 4u);
  EXPECT_EQ(o.foregrounds, (std::vector<std::string>{"gemm", "attention"}));
  EXPECT_EQ(o.attention, bench::AttentionImpl::Auto);
  EXPECT_EQ(o.backends, (std::vector<std::string>{"pickle", "nccl"}));
  EXPECT_EQ(o.backgrounds, (std::vector<std::string>{"p2p"}));
  EXPECT_EQ(o.depth, 8);
  EXPECT_TRUE(o.check);
  EXPECT_EQ(o.ranks, 0);
  EXPECT_FALSE(o.share_gpus);
  // 4 KiB .. 16 GiB by 4: twelve message sizes.
  auto sizes = bench::size_sweep(o.min_bytes, bench::sweep_max_bytes(o, bench::kInterferenceDefaultMaxBytes), o.factor);
  ASSERT_EQ(sizes.size(), 12u);
  EXPECT_EQ(sizes.front(), 4096u);
  EXPECT_EQ(sizes.back(), std::size_t{16} << 30);
}

TEST(InterferenceOptions, EveryFlagIsRead) {
  InterferenceOptions o = parse_interference_options(
      {"--foreground", "attention", "--attention", "own", "--backend", "nccl,pickle", "--background", "p2p,allgather",
       "-b", "1M", "-e", "1G", "-f", "2", "-n", "10", "-w", "0", "--depth", "3", "-c", "0", "--ranks", "4",
       "--share-gpus", "--json", "out.json"});
  EXPECT_EQ(o.foregrounds, (std::vector<std::string>{"attention"}));
  EXPECT_EQ(o.attention, bench::AttentionImpl::Own);
  EXPECT_EQ(bench::parse_interference_options({"--attention", "cudnn"}).attention, bench::AttentionImpl::Cudnn);
  EXPECT_EQ(o.backends, (std::vector<std::string>{"nccl", "pickle"}));
  EXPECT_EQ(o.backgrounds, (std::vector<std::string>{"p2p", "allgather"}));
  EXPECT_EQ(o.min_bytes, std::size_t{1} << 20);
  EXPECT_EQ(o.max_bytes, std::size_t{1} << 30);
  EXPECT_EQ(o.factor, 2u);
  EXPECT_EQ(o.iterations, 10);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.depth, 3);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.ranks, 4);
  EXPECT_TRUE(o.share_gpus);
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_TRUE(parse_interference_options({"--help"}).help);
  // -e below the default -b: that one size.
  InterferenceOptions small = parse_interference_options({"-e", "1K"});
  EXPECT_EQ(small.min_bytes, 1024u);
}

TEST(InterferenceOptions, BadValuesNameTheFlag) {
  auto message = [](const std::vector<std::string>& args) {
    try {
      parse_interference_options(args);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({"--backend", "mpi"}).find("--backend: unknown item 'mpi' (choose from pickle, nccl, ce)"),
            std::string::npos);
  EXPECT_NE(message({"--background", "p2p,"}).find("--background"), std::string::npos);
  EXPECT_NE(message({"--depth", "2000"}).find("--depth 2000: must be between 1 and 1024"), std::string::npos);
  EXPECT_NE(message({"--memory", "cuda"}).find("--memory"), std::string::npos);
  EXPECT_NE(message({"-w"}).find("-w needs a value"), std::string::npos);
  EXPECT_NE(message({"--frob"}).find("unknown option '--frob'"), std::string::npos);
}

TEST(InterferenceWindow, SteadyMessagesGiveTheirRateAndOverlap) {
  // 1 MB every ms from t = 0 to 100 ms; window 10.5 .. 50.5 ms: exactly 40 messages' worth in 40 ms = 1 GB/s.
  std::vector<std::int64_t> done;
  for (int i = 0; i <= 100; ++i) done.push_back(i * kMs);
  auto stats = window_stats(done, 1'000'000, 10 * kMs + kMs / 2, 50 * kMs + kMs / 2);
  EXPECT_TRUE(stats.overlap);
  EXPECT_NEAR(stats.gbps, 1.0, 1e-9);
  EXPECT_NEAR(stats.bytes_in_window, 40e6, 1e-3);
  EXPECT_NEAR(stats.window_ms, 40.0, 1e-9);
  EXPECT_EQ(stats.completed_in_window, 40u);  // completions at 11 .. 50 ms
  EXPECT_EQ(stats.messages, 101u);
  EXPECT_NEAR(stats.max_gap_ms, 1.0, 1e-9);
  EXPECT_NEAR(stats.lead_ms, 10.5, 1e-9);
  EXPECT_NEAR(stats.tail_ms, 49.5, 1e-9);
}

TEST(InterferenceWindow, MessagesLongerThanTheWindowAreSpreadNotRounded) {
  // 16 GiB messages every 44 ms; a 140 ms window sees 3 completions, but 140/44 of a message per message time.
  const std::size_t bytes = std::size_t{16} << 30;
  std::vector<std::int64_t> done = {0, 44 * kMs, 88 * kMs, 132 * kMs, 176 * kMs};
  auto stats = window_stats(done, bytes, 10 * kMs, 150 * kMs);
  EXPECT_TRUE(stats.overlap);
  EXPECT_EQ(stats.completed_in_window, 3u);
  const double rate = static_cast<double>(bytes) / (44 * kMs);  // bytes per ns = GB/s
  EXPECT_NEAR(stats.gbps, rate, rate * 1e-12);
  EXPECT_NEAR(stats.max_gap_ms, 44.0, 1e-9);
}

TEST(InterferenceWindow, ABackgroundThatStartsLateOrStopsEarlyDoesNotOverlap) {
  std::vector<std::int64_t> late = {20 * kMs, 21 * kMs, 22 * kMs, 80 * kMs};
  auto stats = window_stats(late, 4096, 10 * kMs, 50 * kMs);
  EXPECT_FALSE(stats.overlap);
  EXPECT_LT(stats.lead_ms, 0);

  std::vector<std::int64_t> early = {0, 1 * kMs, 2 * kMs, 30 * kMs};
  stats = window_stats(early, 4096, 10 * kMs, 50 * kMs);
  EXPECT_FALSE(stats.overlap);
  EXPECT_LT(stats.tail_ms, 0);
  // Its bytes up to 30 ms still count: 4096 spread over 2 .. 30 ms, 20 of those 28 ms inside the window.
  EXPECT_NEAR(stats.bytes_in_window, 4096.0 * 20 / 28, 1e-9);
  EXPECT_NEAR(stats.max_gap_ms, 28.0, 1e-9);

  // Exactly at the edges counts as overlapping: a completion at the start, another at the end.
  std::vector<std::int64_t> edges = {10 * kMs, 50 * kMs};
  EXPECT_TRUE(window_stats(edges, 4096, 10 * kMs, 50 * kMs).overlap);

  auto none = window_stats({}, 4096, 10 * kMs, 50 * kMs);
  EXPECT_FALSE(none.overlap);
  EXPECT_EQ(none.gbps, 0);
  EXPECT_EQ(none.messages, 0u);
}

TEST(InterferenceWindow, SameTimestampsAreWholeMessagesAndBadInputIsRejected) {
  // Two completions read at the same instant: the second has no interval of its own and counts whole.
  std::vector<std::int64_t> done = {0, 20 * kMs, 20 * kMs, 60 * kMs};
  auto stats = window_stats(done, 1000, 10 * kMs, 50 * kMs);
  EXPECT_NEAR(stats.bytes_in_window, 1000.0 * 10 / 20 + 1000.0 + 1000.0 * 30 / 40, 1e-9);
  EXPECT_EQ(stats.completed_in_window, 2u);

  auto empty_window = window_stats(done, 1000, 20 * kMs, 20 * kMs);
  EXPECT_EQ(empty_window.gbps, 0);
  EXPECT_TRUE(empty_window.overlap);

  EXPECT_THROW(window_stats(done, 1000, 50 * kMs, 10 * kMs), InvalidArgument);
  std::vector<std::int64_t> backwards = {0, 5 * kMs, 3 * kMs};
  EXPECT_THROW(window_stats(backwards, 1000, 0, 10 * kMs), InvalidArgument);
}

TEST(InterferenceWindow, SteadyStateDrainTargetAndVerdict) {
  // Depth 8: the ring must have turned over twice (16 messages) and data must have flowed for the minimum time.
  EXPECT_FALSE(bench::background_steady(15, 0, 100 * kMs, 8, 50 * kMs));
  EXPECT_FALSE(bench::background_steady(16, 0, 49 * kMs, 8, 50 * kMs));
  EXPECT_TRUE(bench::background_steady(16, 0, 50 * kMs, 8, 50 * kMs));
  EXPECT_TRUE(bench::background_steady(2, 5, 5, 1, 0));

  EXPECT_EQ(bench::drain_target(10, 13), 13u);
  EXPECT_EQ(bench::drain_target(13, 10), 13u);
  EXPECT_EQ(bench::drain_target(7, 7), 7u);
  // Any number of ranks: the largest count, wherever it is.
  const std::uint64_t eight[] = {40, 41, 47, 39, 40, 44, 41, 40};
  EXPECT_EQ(bench::drain_target(eight), 47u);
  const std::uint64_t last[] = {3, 2, 9};
  EXPECT_EQ(bench::drain_target(last), 9u);
  EXPECT_EQ(bench::drain_target(std::span<const std::uint64_t>()), 0u);

  EXPECT_TRUE(bench::row_passed(true, 0, 0));
  EXPECT_FALSE(bench::row_passed(false, 0, 0));
  EXPECT_FALSE(bench::row_passed(true, 1, 0));
  EXPECT_FALSE(bench::row_passed(true, 0, 3));
}

/// N ranks' traffic inside one process, for TrafficRunner's stop protocol: message i completes once every rank
/// posted it. `collective`: a post blocks until every other rank posted the same message (a collective's rendezvous,
/// as pickle's allgather does), the case where a rank cannot answer halt() until its peers move.
struct FakeLink {
  explicit FakeLink(int ranks = 2) : posted(static_cast<std::size_t>(ranks), 0), post_delay(posted.size()) {}
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::uint64_t> posted;
  bool collective = false;
  std::chrono::milliseconds rendezvous_timeout{10'000};
  std::vector<std::chrono::microseconds> post_delay;

  std::uint64_t fewest_posted() const { return *std::min_element(posted.begin(), posted.end()); }
};

class FakeTraffic final : public bench::Traffic {
 public:
  FakeTraffic(FakeLink& link, int rank) : link_(link), rank_(static_cast<std::size_t>(rank)) {}
  std::string_view background() const noexcept override { return link_.collective ? "allgather" : "p2p"; }
  std::string_view backend() const noexcept override { return "fake"; }
  void probe() override {}
  void setup(Store&, int, int, const bench::TrafficBuffers&) override {}
  void post(const void*, void*, std::size_t) override {
    std::this_thread::sleep_for(link_.post_delay[rank_]);
    std::unique_lock lock(link_.mutex);
    const std::uint64_t mine = ++link_.posted[rank_];
    link_.changed.notify_all();
    if (link_.collective) {
      // Bounded like every wait in pickle: a protocol bug fails the test instead of hanging it.
      if (!link_.changed.wait_for(lock, link_.rendezvous_timeout, [&] { return link_.fewest_posted() >= mine; })) {
        throw TimeoutError("fake collective: a peer never made the matching call");
      }
    }
  }
  bool oldest_done() override {
    std::lock_guard lock(link_.mutex);
    return link_.fewest_posted() > retired_;
  }
  void retire_oldest() override { ++retired_; }

 private:
  FakeLink& link_;
  std::size_t rank_;
  std::uint64_t retired_ = 0;
};

/// Runs every rank until each completed `completed` messages, then halts them, agrees on the target and drains, as
/// the ranks do.
void run_and_stop(FakeLink& link, std::uint64_t completed) {
  const std::size_t ranks = link.posted.size();
  std::vector<std::unique_ptr<FakeTraffic>> traffic;
  std::vector<std::unique_ptr<bench::TrafficRunner>> runners;
  for (std::size_t r = 0; r < ranks; ++r) {
    traffic.push_back(std::make_unique<FakeTraffic>(link, static_cast<int>(r)));
    runners.push_back(std::make_unique<bench::TrafficRunner>(*traffic.back(), nullptr, nullptr, 4096, 8, -1,
                                                             "rank " + std::to_string(r) + " fake", 10));
  }
  for (auto& runner : runners) runner->start();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto behind = [&] {
    return std::any_of(runners.begin(), runners.end(), [&](const auto& r) { return r->completed() < completed; });
  };
  while (behind() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ASSERT_FALSE(behind());
  std::vector<std::uint64_t> posted;
  for (auto& runner : runners) posted.push_back(runner->halt());
  const std::uint64_t target = bench::drain_target(posted);
  // Each rank drains from its own main thread, at the same time.
  std::vector<std::future<void>> drained;
  for (std::size_t r = 1; r < ranks; ++r) {
    drained.push_back(std::async(std::launch::async, [&, r] { runners[r]->drain(target, Deadline::after_seconds(10)); }));
  }
  runners[0]->drain(target, Deadline::after_seconds(10));
  for (auto& d : drained) d.get();
  for (std::size_t r = 0; r < ranks; ++r) {
    EXPECT_EQ(link.posted[r], target) << "rank " << r;
    EXPECT_EQ(runners[r]->completions().size(), target) << "rank " << r;
    const auto& done = runners[r]->completions();
    for (std::size_t i = 1; i < done.size(); ++i) EXPECT_LE(done[i - 1], done[i]);
    EXPECT_GT(runners[r]->first_completion_ns(), 0);
  }
}

TEST(InterferenceRunner, HaltAndDrainPairEverySendWithAReceive) {
  FakeLink link;
  run_and_stop(link, 200);
}

TEST(InterferenceRunner, ASlowerSideCatchesUpToTheFasterOnesCount) {
  FakeLink link;
  link.post_delay[1] = std::chrono::microseconds(200);  // rank 1 posts slowly: rank 0 runs up to 8 ahead
  run_and_stop(link, 50);
}

TEST(InterferenceRunner, EightRanksOfACollectiveAllStopAtTheSameCount) {
  // Seed 001's allgather: 8 ranks, one of them slower to post; each may halt with a different count, and every one
  // must make every call up to the largest, or the others' last collective would never complete.
  FakeLink link(8);
  link.collective = true;
  link.post_delay[5] = std::chrono::microseconds(300);
  run_and_stop(link, 40);
}

TEST(InterferenceRunner, BlockingCollectivePostsDoNotDeadlockTheHalt) {
  // A side blocked inside post() for call k cannot acknowledge a halt; call k counts as posted, so that the peer
  // posts it during the drain and releases it.
  FakeLink link;
  link.collective = true;
  link.post_delay[0] = std::chrono::microseconds(300);
  run_and_stop(link, 50);
}

TEST(InterferenceRunner, AFailedPostIsRethrownByHalt) {
  FakeLink link;
  link.collective = true;
  link.rendezvous_timeout = std::chrono::milliseconds(300);
  FakeTraffic lonely(link, 0);  // no rank 1: the first collective post times out
  bench::TrafficRunner runner(lonely, nullptr, nullptr, 4096, 4, -1, "rank 0 fake", 10);
  runner.start();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) {
    try {
      runner.rethrow_failure();
    } catch (const TimeoutError&) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(runner.completed(), 0u);
  EXPECT_THROW(runner.halt(), TimeoutError);
}

}  // namespace
}  // namespace pickle::test
