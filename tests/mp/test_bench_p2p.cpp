// `pickle bench p2p` end to end on host memory: the real command launches its own ranks, moves checked data with
// the copy-engine baseline and pickle's Communicator, prints the table and writes the result file. Also: NCCL
// without GPU memory is "unavailable" (not a failure), bad flags exit 2, and a corrupted byte fails the run.
#include <gtest/gtest.h>

#include <signal.h>

#include <iostream>
#include <set>
#include <thread>

#include "bench_test_util.hpp"
#include "core/format.hpp"
#include "core/json.hpp"
#include "device/backends.hpp"
#include "netns_pair.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const json::Value* find_backend(const json::Value& root, const std::string& name) {
  for (const auto& backend : root.at("backends").as_array()) {
    if (backend.at("name").as_string() == name) return &backend;
  }
  return nullptr;
}

TEST(BenchP2p, CeAndPickleOnHostMemoryMoveEveryByteIntact) {
  TempDir dir("bench");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "p2p", {"--backend", "ce,pickle", "-b", "1", "-e", "1M", "-f", "4", "-n", "3", "-w",
                                        "1", "--memory", "host", "--json", json_path});
  ASSERT_TRUE(run.status.ok()) << run.describe();

  // 11 sizes (1 B .. 1 MiB, factor 4) x 3 modes; per backend: time, algbw, #wrong; then the pickle/ce ratio.
  auto rows = table_rows(run.out);
  ASSERT_EQ(rows.size(), 33u) << run.out;
  std::set<std::string> modes;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 2u + 3u * 2u + 1u) << run.out;
    modes.insert(row[0]);
    EXPECT_EQ(row[4], "0") << "ce #wrong in row: " << row[0] << " " << row[1];
    EXPECT_EQ(row[7], "0") << "pickle #wrong in row: " << row[0] << " " << row[1];
    EXPECT_GT(std::stod(row[2]), 0) << row[0] << " " << row[1];
    EXPECT_GT(std::stod(row[5]), 0) << row[0] << " " << row[1];
  }
  EXPECT_EQ(modes, (std::set<std::string>{"uni", "bi", "lat"}));

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("schema").as_string(), "pickle-bench/1");
  EXPECT_EQ(root.at("suite").as_string(), "p2p");
  EXPECT_EQ(root.at("command").at(0).as_string(), "pickle");
  EXPECT_EQ(root.at("options").at("memory").as_string(), "host");
  EXPECT_EQ(root.at("options").at("max_bytes").as_int(), 1 << 20);
  EXPECT_TRUE(root.at("environment").contains("PICKLE_TIMEOUT"));
  EXPECT_FALSE(root.at("environment").contains("PICKLE_TOKEN") &&
               root.at("environment").at("PICKLE_TOKEN").as_string() != "(set)")
      << "the store's secret must not be written to result files";
  EXPECT_TRUE(root.at("topology").contains("host"));
  EXPECT_TRUE(root.at("topology").contains("versions"));
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  EXPECT_FALSE(root.at("gpus_shared").as_bool());  // host memory: no GPU, none shared
  for (const char* name : {"ce", "pickle"}) {
    const json::Value* backend = find_backend(root, name);
    ASSERT_NE(backend, nullptr) << name;
    EXPECT_EQ(backend->at("status").as_string(), "ok") << name << ": " << backend->at("detail").as_string();
  }
  const auto& results = root.at("results").as_array();
  ASSERT_EQ(results.size(), 66u);
  for (const auto& r : results) {
    std::string what = r.at("backend").as_string() + " " + r.at("mode").as_string() + " " +
                       std::to_string(r.at("bytes").as_int());
    EXPECT_EQ(r.at("wrong").as_int(), 0) << what;
    EXPECT_TRUE(r.at("gated").as_bool()) << what;  // -n 3 at the default depth: behind the gate, enqueue not timed
    EXPECT_EQ(r.at("iterations").as_int(), 3) << what;
    EXPECT_EQ(r.at("repeats").as_int(), 5) << what;
    EXPECT_TRUE(r.at("error").is_null()) << what;
    const auto& time = r.at("time_us");
    EXPECT_GT(time.at("min").as_double(), 0) << what;
    EXPECT_LE(time.at("min").as_double(), time.at("median").as_double()) << what;
    EXPECT_LE(time.at("median").as_double(), time.at("max").as_double()) << what;
    EXPECT_EQ(time.at("samples").size(), 5u) << what;
    EXPECT_GT(r.at("algbw_gbps").at("median").as_double(), 0) << what;
    EXPECT_EQ(r.at("busbw_gbps"), r.at("algbw_gbps")) << what;
    if (r.at("backend").as_string() == "pickle") {
      // Steady state: every peer allocation was mapped during warm-up; the timed transfers open nothing.
      EXPECT_EQ(r.at("mapping_opens_timed").as_int(), 0) << what;
      // Host memory writes every completion on the copy's stream (completion lanes are CUDA's, and not the default).
      EXPECT_EQ(r.at("completion_lane_writes_timed").as_int(), 0) << what;
    } else {
      EXPECT_TRUE(r.at("completion_lane_writes_timed").is_null()) << what;
    }
  }
}

// More iterations than the gate may hold: host streams' queues are bounded as CUDA's, so a closed gate in front of
// more operations than they hold would block the enqueue for good. Beyond the limit the iterations go with the gate
// open (gated=false). Until 2026-11-29 host memory was always gated, and this hung until killed.
TEST(BenchP2p, MoreIterationsThanTheGateHoldsRunUngatedOnHostMemory) {
  TempDir dir("bench");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "p2p", {"--backend", "pickle", "--mode", "bi", "-b", "4K", "-e", "4K", "-n", "400",
                                        "-w", "1", "--repeats", "1", "--memory", "host", "--json", json_path},
                           {"PICKLE_TIMEOUT=20"});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  json::Value root = json::parse(read_file(json_path));
  const auto& results = root.at("results").as_array();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].at("gated").as_bool());
  EXPECT_EQ(results[0].at("wrong").as_int(), 0);
  EXPECT_EQ(results[0].at("iterations").as_int(), 400);
}

// `--lanes`: seed 001's lane comparison (issue 8's `pickle bench p2p --lanes 1,2,3,4`) is the transports suite's,
// which runs each library forced onto its network path at each lane count; p2p hands it its flags.
TEST(BenchP2p, LanesRunTheNetworkComparisonAtEachLaneCount) {
#ifndef PICKLE_HAVE_LIBFABRIC
  GTEST_SKIP() << "built without libfabric: no net transport";
#endif
  TempDir dir("bench");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "p2p", {"--lanes", "1,2", "-b", "64K", "-e", "1M", "-f", "16", "-n", "2", "-w", "1",
                                        "--repeats", "1", "--memory", "host", "--json", json_path},
                           {"PICKLE_NET_CHUNK=65536"}, std::chrono::seconds(120));
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.err.find("bench p2p: --lanes: running `pickle bench transports --ops p2p`"), std::string::npos)
      << run.err;
  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("suite").as_string(), "transports");
  const auto& operation = root.at("operations").at(0);
  EXPECT_EQ(operation.at("op").as_string(), "p2p");
  for (const std::string lanes : {"1", "2"}) {
    bool found = false;
    for (const auto& config : operation.at("configurations").as_array()) {
      if (config.at("key").as_string() != "pickle-net-" + lanes) continue;
      found = true;
      EXPECT_EQ(config.at("status").as_string(), "ok") << config.at("detail").as_string();
      EXPECT_EQ(config.at("env").at("PICKLE_NET_LANES").as_string(), lanes);
      ASSERT_FALSE(config.at("runs").as_array().empty());
      for (const auto& r : config.at("runs").as_array()) EXPECT_EQ(r.at("wrong").as_int(), 0);
    }
    EXPECT_TRUE(found) << "no pickle-net-" << lanes << " configuration";
  }
}

// A host stream's queue shallower than the gate's limit (PICKLE_HOST_STREAM_DEPTH=32): the bench asks the stream
// how deep its queue is, and the default -n 20 goes with the gate open. Until then it blocked for good below a
// depth of about 128.
TEST(BenchP2p, AShallowHostStreamQueueRunsUngatedInsteadOfBlocking) {
  TempDir dir("bench");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "p2p", {"--backend", "ce,pickle", "-b", "4K", "-e", "64K", "-f", "16", "--repeats",
                                        "2", "--memory", "host", "--json", json_path},
                           {"PICKLE_TIMEOUT=20", "PICKLE_HOST_STREAM_DEPTH=32"});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  json::Value root = json::parse(read_file(json_path));
  const auto& results = root.at("results").as_array();
  ASSERT_EQ(results.size(), 12u);  // 2 backends x 3 modes x 2 sizes
  for (const auto& r : results) {
    const std::string what = r.at("backend").as_string() + " " + r.at("mode").as_string();
    EXPECT_FALSE(r.at("gated").as_bool()) << what;
    EXPECT_EQ(r.at("wrong").as_int(), 0) << what;
  }
  // The table says it too (until 2026-11-30 only the JSON did).
  EXPECT_NE(run.out.find("# note: 12 point(s) enqueued with the gate open"), std::string::npos) << run.out;
  // One iteration fits that queue behind the gate (pickle: 9 operations and the repeat's 4, two entries each, 26 of
  // 32): gated again, so that the gate is not simply always off on host memory.
  run = run_bench(dir, "p2p", {"--backend", "ce,pickle", "-b", "4K", "-e", "4K", "-n", "1", "--repeats", "2",
                               "--memory", "host", "--json", json_path},
                  {"PICKLE_TIMEOUT=20", "PICKLE_HOST_STREAM_DEPTH=32"});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  root = json::parse(read_file(json_path));
  ASSERT_EQ(root.at("results").as_array().size(), 6u);  // 2 backends x 3 modes
  for (const auto& r : root.at("results").as_array()) {
    const std::string what = r.at("backend").as_string() + " " + r.at("mode").as_string();
    EXPECT_TRUE(r.at("gated").as_bool()) << what;
    EXPECT_EQ(r.at("wrong").as_int(), 0) << what;
  }
  EXPECT_EQ(run.out.find("gate open"), std::string::npos) << run.out;
}

TEST(BenchP2p, NcclWithoutGpuMemoryIsUnavailableNotAFailure) {
  TempDir dir("bench");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "p2p", {"--backend", "nccl,ce", "-b", "4K", "-e", "4K", "-n", "2", "-w", "1", "-c", "0",
                                        "--mode", "uni", "--memory", "host", "--json", json_path});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.out.find("# nccl    unavailable: rank 0: nccl needs GPU memory"), std::string::npos) << run.out;
  auto rows = table_rows(run.out);
  ASSERT_EQ(rows.size(), 1u) << run.out;
  EXPECT_EQ(rows[0][2], "n/a") << run.out;   // nccl's time cell
  EXPECT_EQ(rows[0][7], "N/A") << run.out;   // ce's #wrong with -c 0: not checked
  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(find_backend(root, "nccl")->at("status").as_string(), "unavailable");
  ASSERT_EQ(root.at("results").size(), 1u);  // ce's only
  EXPECT_TRUE(root.at("results").at(0).at("wrong").is_null());
}

// --memory cuda where there is no GPU: one clear refusal before any rank starts (it used to say "running 2
// host-memory ranks" and then fail in each rank's cudaSetDevice).
TEST(BenchP2p, MemoryCudaWithoutAGpuIsRefusedBeforeAnyRankStarts) {
  if (device::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  TempDir dir("bench");
  BenchRun run = run_bench(dir, "p2p", {"--memory", "cuda", "-b", "4K", "-e", "4K"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  EXPECT_NE(run.err.find("--memory cuda needs a GPU, and this machine has none"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("running 2 host-memory ranks"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("cudaSetDevice"), std::string::npos) << run.err;
}

// A backend whose set-up fails on a rank says so once per rank name (the error already named its rank, and the
// lockstep used to add "rank 0: " again).
TEST(BenchP2p, ASetUpFailureNamesItsRankOnce) {
  TempDir dir("bench");
  BenchRun run = run_bench(dir, "p2p", {"--backend", "pickle", "-b", "4K", "-e", "4K", "--memory", "host"},
                           {"PICKLE_IPC_STREAMS=99"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  const std::string all = run.out + run.err;
  EXPECT_NE(all.find("set-up: rank 0: PICKLE_IPC_STREAMS=99 must be between 1 and 8"), std::string::npos) << all;
  EXPECT_EQ(all.find("rank 0: rank 0:"), std::string::npos) << all;
}

// A PICKLE_TIMEOUT that is not a number is said once, with nothing launched (exit 1). Until 2026-11-30 each rank
// said it, and then the launcher said it stopped the others. So is a PICKLE_BENCH_CORRUPT that is not a boolean
// (it was said by rank 0 as a failure of "creating streams and events").
TEST(BenchP2p, ABadTimeoutIsSaidOnceBeforeAnyRankStarts) {
  const std::pair<std::string, std::string> cases[] = {
      {"PICKLE_TIMEOUT=abc", "PICKLE_TIMEOUT='abc' is not a number"},
      {"PICKLE_BENCH_CORRUPT=maybe", "PICKLE_BENCH_CORRUPT='maybe' is not a boolean"}};
  for (const auto& [setting, said] : cases) {
    TempDir dir("bench");
    BenchRun run = run_bench(dir, "p2p", {"--backend", "pickle", "-b", "4K", "-e", "4K", "--memory", "host"},
                             {setting});
    EXPECT_TRUE(run.status.exited && run.status.code == 1) << setting << ": " << run.describe();
    EXPECT_EQ(count_of(run.err, said), 1u) << run.describe();
    EXPECT_EQ(run.err.find("pickle launch"), std::string::npos) << run.describe();
    EXPECT_EQ(run.err.find("creating streams"), std::string::npos) << run.describe();
    EXPECT_EQ(run.out, "") << run.describe();
  }
}

TEST(BenchP2p, BenchWithoutASuiteRunsTheDefaultSuiteWithItsOptions) {
  TempDir dir("bench");
  BenchRun run = run_bench(dir, /*suite=*/"", {"--backend", "pickle", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1",
                                                "--memory", "host"});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.out.find("running the default suite, p2p"), std::string::npos) << run.out;
  auto rows = table_rows(run.out);
  EXPECT_EQ(rows.size(), 9u) << run.out;  // 3 sizes x 3 modes
  for (const auto& row : rows) EXPECT_EQ(row[4], "0") << run.out;
}

TEST(BenchP2p, AnExtraRankOnlyKeepsInStep) {
  TempDir dir("bench");
  BenchRun run = run_bench(dir, "p2p", {"--ranks", "3", "--backend", "ce,pickle", "-b", "1000", "-e", "100000", "-f",
                                        "10", "-n", "2", "-w", "1", "--repeats", "2", "--memory", "host"});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.out.find("ranks 0 -> 1 of 3"), std::string::npos) << run.out;
  for (const auto& row : table_rows(run.out)) {
    ASSERT_EQ(row.size(), 9u) << run.out;
    EXPECT_EQ(row[4], "0") << run.out;
    EXPECT_EQ(row[7], "0") << run.out;
  }
}

TEST(BenchP2p, BadFlagsExitWithTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {"--bogus"}, {"-f", "1"}, {"-b", "2M", "-e", "1M"}, {"-b", "12Q"}, {"--backend", "ce,mpi"},
      {"--backend", "ce,ce"}, {"--mode", "uni,sideways"}, {"-n", "0"}, {"-c", "2"}, {"--memory", "disk"}, {"-e"},
      {"-w", "0"}, {"--json", ""}, {"--lanes", "0"}, {"--lanes", "1", "--mode", "bi"},
      {"--lanes", "1", "--backend", "pickle"}, {"--iface", "lo"}};
  for (const auto& args : cases) {
    TempDir dir("bench");
    BenchRun run = run_bench(dir, "p2p", args);
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << args[0] << ": " << run.describe();
    EXPECT_NE(run.err.find("usage: pickle bench p2p"), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
  TempDir dir("bench");
  BenchRun run = run_bench(dir, "p2p", {"-b", "12Q"});
  EXPECT_NE(run.err.find("-b '12Q': unknown unit"), std::string::npos) << run.err;
}

// A warm-up of 0 was accepted, and every pickle row then failed ("peer allocations mapped during the timed repeats"):
// the first transfer into a buffer maps it. Refused as a usage error, here and by the suites that run p2p children;
// a negative one with the same range and reason (it said "between 0 and 1000000", and 0 was then refused).
TEST(BenchP2p, NoWarmUpIsAUsageErrorThatSaysWhy) {
  const std::string why = "at least one warm-up iteration per size is needed";
  for (const char* suite : {"p2p", "transports", "matrix"}) {
    for (const char* warmup : {"0", "-1"}) {
      TempDir dir("bench");
      BenchRun run = run_bench(dir, suite, {"-w", warmup});
      EXPECT_TRUE(run.status.exited && run.status.code == 2) << suite << " " << warmup << ": " << run.describe();
      EXPECT_NE(run.err.find(cat("-w ", warmup, ": must be between 1 and 1000000: ", why)), std::string::npos)
          << suite << " " << warmup << ": " << run.err;
    }
  }
  // transports without p2p takes 0, and says 0 where it refuses a negative one (-w comes before --ops here).
  TempDir dir("bench");
  BenchRun run = run_bench(dir, "transports", {"-w", "-1", "--ops", "allreduce"});
  EXPECT_NE(run.err.find("-w -1: must be between 0 and 1000000"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find(why), std::string::npos) << run.err;
}

// A smallest size that cannot fit in host memory is refused before anything is allocated. Host memory is taken
// lazily: the ranks used to fill buffers past what the machine had, until the kernel's OOM killer ended the run
// (exit 137, a 0-byte --json file, no word of why).
// Every rank refuses it in the same phase, so it is said once, by rank 0 (until 2026-11-29j each rank said it).
TEST(BenchP2p, ASmallestSizeBeyondHostMemoryIsRefusedBeforeAllocating) {
  for (const char* suite : {"p2p", "coll", "memcpy"}) {
    TempDir dir("bench");
    const std::vector<std::string> args =
        std::string(suite) == "memcpy" ? std::vector<std::string>{"-b", "1T", "-e", "1T", "--memory", "host"}
                                       : std::vector<std::string>{"-b", "1T", "-e", "1T", "-n", "2", "-w", "1",
                                                                  "--memory", "host"};
    BenchRun run = run_bench(dir, suite, args);
    EXPECT_TRUE(run.status.exited && run.status.code == 1) << suite << ": " << run.describe();
    const std::string said = "the smallest size, 1T, does not fit";
    const std::size_t first = run.err.find(said);
    EXPECT_NE(first, std::string::npos) << suite << ": " << run.err;
    if (first != std::string::npos) {
      EXPECT_EQ(run.err.find(said, first + 1), std::string::npos) << suite << ": " << run.err;
    }
    EXPECT_NE(run.err.find(std::string("pickle bench ") + suite + ": allocating"), std::string::npos) << run.err;
  }
}

TEST(BenchP2p, ACorruptedByteIsCountedAndFailsTheRun) {
  TempDir dir("bench");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "p2p", {"--backend", "ce,pickle", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-w",
                                        "1", "--mode", "uni,lat", "--memory", "host", "--json", json_path},
                           {"PICKLE_BENCH_CORRUPT=1"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  const auto& results = root.at("results").as_array();
  ASSERT_EQ(results.size(), 2u * 2u * 3u);
  for (const auto& r : results) {
    // One flipped byte per message: one receiver in uni, both ranks receive in lat.
    std::int64_t expected = r.at("mode").as_string() == "uni" ? 1 : 2;
    EXPECT_EQ(r.at("wrong").as_int(), expected)
        << r.at("backend").as_string() << " " << r.at("mode").as_string() << " " << r.at("bytes").as_int();
  }
  // Said once at the end, on both streams: 6 uni rows of 1 byte, 6 lat rows of 2.
  const std::string said = "FAILED: 18 wrong bytes in the data checks of 12 rows (ce uni 1024 B; ";
  EXPECT_NE(run.err.find("pickle bench p2p: " + said), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("# " + said), std::string::npos) << run.out;
}

}  // namespace
}  // namespace pickle::test

namespace pickle::test {
namespace {

// A rank that stops mid-sweep (SIGSTOP: alive, holding its connections, answering nothing): rank 0 exits 1 naming
// the rank that never came (and its own failure first, where its part of the phase failed too), and still prints and
// writes what it measured before. Until 2026-11-29j it said only "store allgather ... never arrived" and printed and
// wrote nothing. Ranks started by hand: a launcher would stop them all at once.
TEST(BenchP2p, ARankThatStopsMidSweepEndsTheRunWithItsErrorAndWhatWasMeasured) {
  TempDir dir("bench-p2p-stop");
  const std::string json_path = dir / "result.json";
  // Three modes: the sweep outlasts its first progress line (3 s in) by far on a fast machine too.
  const StoppedRun run = run_and_stop_rank1(dir, {"p2p", "--memory", "host", "--backend", "pickle", "--mode",
                                                  "uni,bi,lat", "-b", "1M", "-e", "256M", "-f", "2", "-n", "20", "-w",
                                                  "2", "--json", json_path});
  const std::string& out = run.out;
  ASSERT_NO_FATAL_FAILURE(expect_the_stop_ended_the_run(run, "p2p"));
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(find_backend(root, "pickle")->at("status").as_string(), "failed");
  std::size_t measured = 0, failed = 0;
  for (const auto& r : root.at("results").as_array()) {
    if (!r.at("error").is_null()) {
      ++failed;
      EXPECT_NE(r.at("error").as_string().find("could not exchange"), std::string::npos) << r.at("error").as_string();
      continue;
    }
    if (r.at("wrong").is_null()) continue;  // not reached
    ++measured;
    EXPECT_EQ(r.at("wrong").as_int(), 0) << r.at("bytes").as_int();
  }
  EXPECT_GE(measured, 1u);
  EXPECT_EQ(failed, 1u);
  // Its rows are on stdout too, and the failed step says FAILED.
  EXPECT_GE(table_rows(out).size(), measured + 1) << out;
  EXPECT_NE(out.find("FAILED"), std::string::npos) << out;
}

// Ranks 0 and 1 on two "hosts": two network namespaces joined by a veth link the test makes (and impairs). The suite
// must see that the ranks share no host, run pickle over its net transport (chosen by the communicator, nothing
// forced), say why the copy engine cannot take part, and check every byte, as it would between two machines.
TEST(BenchP2p, RanksOnTwoHostsRunPickleOverNetAndSayWhyCeCannot) {
  std::string why_not;
  auto pair = NetnsPair::create(&why_not);
  if (!pair) GTEST_SKIP() << why_not;
  TempDir dir("bench-p2p-hosts");
  const std::string json_path = dir / "result.json";
  const int port = free_tcp_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    // One process per host: LOCAL_WORLD_SIZE=1, the store at rank 0's end of the link.
    std::vector<std::string> env = {"RANK=" + std::to_string(rank),
                                    "WORLD_SIZE=2",
                                    "LOCAL_RANK=0",
                                    "LOCAL_WORLD_SIZE=1",
                                    "MASTER_ADDR=" + pair->address(0),
                                    "MASTER_PORT=" + std::to_string(port),
                                    "PICKLE_TIMEOUT=60",
                                    "PICKLE_NET_PROVIDER=tcp",
                                    "PICKLE_NET_IFACE=" + pair->iface(rank),
                                    "PICKLE_NET_LANES=2",
                                    "PATH=/usr/bin:/bin"};
    std::vector<std::string> argv = {PICKLE_CLI_PATH, "bench", "p2p", "--memory", "host", "--backend", "pickle,ce",
                                     "--mode", "uni,bi,lat", "-b", "4K", "-e", "1M", "-f", "16", "-n", "4", "-w", "1",
                                     "--repeats", "2", "--json", json_path};
    pids.push_back(spawn_program(pair->exec_in(rank, argv), env, dir / ("out" + std::to_string(rank)),
                                 dir / ("err" + std::to_string(rank))));
  }
  for (int rank = 0; rank < 2; ++rank) {
    auto status = wait_pid_or_kill(pids[rank], std::chrono::seconds(120));
    EXPECT_TRUE(status.ok()) << "rank " << rank << " " << status.describe() << "\n"
                             << read_file(dir / ("err" + std::to_string(rank)));
  }
  const std::string out = read_file(dir / "out0");
  EXPECT_NE(out.find("# pickle  ok: transport net"), std::string::npos) << out;
  EXPECT_NE(out.find("# ce      unavailable"), std::string::npos) << out;
  EXPECT_NE(out.find("different hosts"), std::string::npos) << out;

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  EXPECT_EQ(find_backend(root, "pickle")->at("status").as_string(), "ok");
  EXPECT_EQ(find_backend(root, "ce")->at("status").as_string(), "unavailable");
  int measured = 0;
  for (const auto& r : root.at("results").as_array()) {
    if (r.at("backend").as_string() != "pickle") continue;
    ++measured;
    EXPECT_EQ(r.at("wrong").as_int(), 0) << r.at("mode").as_string() << " " << r.at("bytes").as_int();
    EXPECT_GT(r.at("busbw_gbps").at("median").as_double(), 0.0);
  }
  EXPECT_EQ(measured, 9);  // uni, bi, lat x 4K, 64K, 1M
  std::cout << "link impairment: " << pair->impairment() << "; " << pair->drops() << std::endl;
}

}  // namespace
}  // namespace pickle::test
