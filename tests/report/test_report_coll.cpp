// `pickle report` for the coll and scenario suites: real host-memory `pickle bench coll --json` and `pickle bench
// scenario --json` runs, plus a hand-written two-backend coll file whose numbers are known, go in; report.md must
// hold a "Size | pickle | NCCL | pickle/NCCL | #wrong" table per collective and placement with a row per size, the
// right ratios, a table per scenario, and every plot it links must be a real PNG.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "report_test_util.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::string kCollHeader = "| Size | pickle | NCCL | pickle/NCCL | #wrong |";
/// The same where pickle's results say what they copied inside the ranks' GPUs (every real run's do).
const std::string kCollHeaderWithLocal =
    "| Size | pickle | NCCL | pickle/NCCL | #wrong | pickle local copies per call |";

/// Two backends at two sizes, allreduce float sum: pickle's busbw twice NCCL's at 1 MiB, half at 4 MiB in place;
/// NCCL's in-place alltoall is unsupported.
const char* kTwoBackends = R"({
  "schema": "pickle-bench/1", "suite": "coll", "command": ["pickle", "bench", "coll"],
  "started_utc": "2026-01-01T00:00:00Z",
  "options": {"min_bytes": 1048576, "max_bytes": 4194304, "factor": 4, "iterations": 20, "warmup": 5, "repeats": 5,
              "check": true, "memory": "cuda", "world_size": 2, "backends": ["pickle", "nccl"]},
  "backends": [{"name": "pickle", "status": "ok", "detail": ""},
               {"name": "nccl", "status": "ok", "detail": "NCCL 2.28.9"}],
  "results": [
    {"backend": "pickle", "collective": "allreduce", "dtype": "float", "op": "sum", "in_place": false,
     "bytes": 1048576, "time_us": {"median": 10, "min": 9, "max": 11},
     "busbw_gbps": {"median": 300, "min": 290, "max": 310}, "wrong": 0},
    {"backend": "nccl", "collective": "allreduce", "dtype": "float", "op": "sum", "in_place": false,
     "bytes": 1048576, "time_us": {"median": 20, "min": 19, "max": 21},
     "busbw_gbps": {"median": 150, "min": 140, "max": 160}, "wrong": 0},
    {"backend": "pickle", "collective": "allreduce", "dtype": "float", "op": "sum", "in_place": true,
     "bytes": 4194304, "time_us": {"median": 40, "min": 39, "max": 41},
     "busbw_gbps": {"median": 100, "min": 99, "max": 101}, "wrong": 0},
    {"backend": "nccl", "collective": "allreduce", "dtype": "float", "op": "sum", "in_place": true,
     "bytes": 4194304, "time_us": {"median": 20, "min": 19, "max": 21},
     "busbw_gbps": {"median": 200, "min": 190, "max": 210}, "wrong": 3},
    {"backend": "pickle", "collective": "alltoall", "dtype": "float", "op": null, "in_place": true,
     "bytes": 1048576, "time_us": {"median": 10, "min": 9, "max": 11},
     "busbw_gbps": {"median": 50, "min": 49, "max": 51}, "wrong": 0},
    {"backend": "nccl", "collective": "alltoall", "dtype": "float", "op": null, "in_place": true,
     "bytes": 1048576, "time_us": null, "busbw_gbps": null, "wrong": null,
     "unsupported": "NCCL has no in-place alltoall"}
  ],
  "exit_code": 1
})";

TEST(ReportColl, CollAndScenarioRunsGiveTablesAndPlots) {
  TempDir dir("report-coll");
  const std::string coll = dir / "coll.json", synthetic = dir / "two.json";
  Result bench = run_pickle(dir,
                            {"bench", "coll", "-c", "allreduce,allgather", "--memory", "host", "-b", "1K", "-e", "16K",
                             "-f", "4", "-n", "2", "-w", "1", "--json", coll, "--backend", "pickle,nccl"},
                            std::chrono::seconds(60));
  ASSERT_TRUE(bench.status.ok()) << bench.status.describe() << "\n" << bench.err;
  std::vector<std::string> inputs = {coll, synthetic};
  const std::vector<std::vector<std::string>> scenarios = {
      {"allreduce-bench", "--bytes", "64K", "-n", "2"},
      {"flags", "-n", "20", "-w", "1"},
      {"one-vs-many", "--small", "4K", "--count", "10", "-n", "2"},
      {"tp-pp", "--batch", "1,2", "--seq", "4", "-n", "1"},
      {"switchml", "--numel", "5000", "-n", "3", "-w", "1"}};
  for (const auto& scenario : scenarios) {
    std::string path = dir / (scenario[0] + ".json");
    std::vector<std::string> args = {"bench", "scenario"};
    args.insert(args.end(), scenario.begin(), scenario.end());
    args.insert(args.end(), {"--memory", "host", "--json", path});
    bench = run_pickle(dir, args, std::chrono::seconds(60));
    ASSERT_TRUE(bench.status.ok()) << scenario[0] << ": " << bench.status.describe() << "\n" << bench.err;
    inputs.push_back(path);
  }
  std::ofstream(synthetic) << kTwoBackends;

  const std::string out = dir / "out";
  std::vector<std::string> args = {"report", "-o", out};
  args.insert(args.end(), inputs.begin(), inputs.end());
  Result report = run_pickle(dir, args, std::chrono::seconds(90));
  ASSERT_TRUE(report.status.ok()) << report.status.describe() << "\n" << report.err;
  EXPECT_EQ(report.err.find("not known"), std::string::npos) << report.err;
  const std::string md = read_file(out + "/report.md");
  EXPECT_NE(md.find("pickle bench coll -c allreduce,allgather --memory host"), std::string::npos) << md;
  EXPECT_NE(md.find("NCCL: **unavailable**"), std::string::npos) << md;

  // Host run: allreduce and allgather (float), out-of-place and in-place: 4 tables of 3 sizes, with pickle's local
  // copies (none for allreduce; an out-of-place allgather copies every rank's own block: the size, over the ranks).
  auto host = tables(md, kCollHeaderWithLocal);
  ASSERT_EQ(host.size(), 4u) << md;
  const std::regex number(R"(^[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?$)");  // tiny busbw on a loaded host prints as 2.24e-04
  for (std::size_t t = 0; t < 4; ++t) {
    ASSERT_EQ(host[t].size(), 3u) << "table " << t;
    EXPECT_EQ(host[t][0][0], "1 KiB");
    EXPECT_EQ(host[t][2][0], "16 KiB");
    const bool allgather_out_of_place = t == 2;
    for (const auto& row : host[t]) {
      ASSERT_EQ(row.size(), 6u);
      EXPECT_TRUE(std::regex_match(row[1], number)) << "pickle cell '" << row[1] << "'";
      EXPECT_EQ(row[2], "n/a");
      EXPECT_EQ(row[4], "0");
      EXPECT_EQ(row[5], allgather_out_of_place ? row[0] : "0") << "table " << t;
    }
  }
  // The synthetic file (no local copies recorded): allreduce in both placements, alltoall in place only ("Not
  // measured." out of place).
  auto found = tables(md, kCollHeader);
  ASSERT_EQ(found.size(), 3u) << md;
  EXPECT_NE(md.find("**Out-of-place**\n\nNot measured."), std::string::npos) << md;
  // The synthetic file's allreduce: out-of-place 1 MiB 300 vs 150 GB/s -> 2.00; in-place 4 MiB 100 vs 200, with
  // NCCL's 3 wrong elements shown and no ratio (wrong data is no result; until 2026-11-30 it read 0.50); its alltoall
  // in place: NCCL unsupported.
  ASSERT_EQ(found[0].size(), 1u);
  EXPECT_EQ(found[0][0], (std::vector<std::string>{"1 MiB", "300.0", "150.0", "2.00", "0"}));
  ASSERT_EQ(found[1].size(), 1u);
  EXPECT_EQ(found[1][0], (std::vector<std::string>{"4 MiB", "100.0", "200.0", "—", "**NCCL: 3**"}));
  ASSERT_EQ(found[2].size(), 1u);
  EXPECT_EQ(found[2][0], (std::vector<std::string>{"1 MiB", "50.00", "unsupported", "—", "0"}));

  // Scenarios: one table each, a row for pickle.
  auto bench_rows =
      tables(md, "| Backend | Payload | Trials | algbw GB/s | algbw Gbps | busbw GB/s | busbw Gbps | #wrong |");
  ASSERT_EQ(bench_rows.size(), 1u) << md;
  ASSERT_EQ(bench_rows[0].size(), 1u);
  EXPECT_EQ(bench_rows[0][0][0], "pickle");
  EXPECT_EQ(bench_rows[0][0][1], "65.5 KB");
  EXPECT_EQ(bench_rows[0][0][2], "2");
  EXPECT_EQ(bench_rows[0][0][7], "0");
  auto flag_rows = tables(md, "| Backend | all_gather_object us/call | all_reduce us/call | ratio | #wrong |");
  ASSERT_EQ(flag_rows.size(), 1u) << md;
  EXPECT_TRUE(std::regex_match(flag_rows[0][0][3], number)) << flag_rows[0][0][3];
  EXPECT_EQ(flag_rows[0][0][4], "0");
  auto many_rows = tables(md,
                          "| Backend | 1 x 41.0 KB ms | 10 x 4.1 KB ms | many/one | busbw one GB/s | busbw many GB/s "
                          "| #wrong |");
  ASSERT_EQ(many_rows.size(), 1u) << md;
  EXPECT_EQ(many_rows[0][0][6], "0");
  // tp-pp (seed 003): a row per backend and pass (2 prefill, 2 decode), the seed's ratios; its bar chart.
  auto tp_pp_rows = tables(md,
                           "| Backend | Row | Tokens | TP=1 ms | TP=2 compute ms | TP=2 ms | TP comm % | TP eff % | "
                           "PP=2 ms | PP % | #wrong |");
  ASSERT_EQ(tp_pp_rows.size(), 1u) << md;
  ASSERT_EQ(tp_pp_rows[0].size(), 4u) << md;
  EXPECT_EQ(tp_pp_rows[0][0][1], "prefill 1 x 4");
  EXPECT_EQ(tp_pp_rows[0][3][1], "decode 2");
  for (const auto& row : tp_pp_rows[0]) EXPECT_EQ(row[10], "0");
  EXPECT_NE(md.find("Model: tiny (2 layers, h 128, i 256)"), std::string::npos) << md;
  // switchml (seed 002): SwitchML's summary per backend (the software switch, pickle); the goodput chart.
  auto switch_rows = tables(md, "| Backend | Tensor | Jobs | Min ns | Max ns | Median ns | Mean ns | Std dev ns | "
                                "Goodput at the median Gbps | #wrong |");
  ASSERT_EQ(switch_rows.size(), 1u) << md;
  ASSERT_EQ(switch_rows[0].size(), 2u) << md;
  EXPECT_EQ(switch_rows[0][0][0], "software switch");
  EXPECT_EQ(switch_rows[0][1][0], "pickle");
  for (const auto& row : switch_rows[0]) {
    EXPECT_EQ(row[1], "5000 int32 (20000 B)");
    EXPECT_EQ(row[2], "3");
    EXPECT_EQ(row[9], "0");
  }

  // A plot per collective x datatype x operator: 2 for the host run, 2 for the synthetic file; tp-pp's and switchml's
  // bar charts.
  EXPECT_EQ(check_plots(out, md), 6);
}

// Rows whose data check failed (`wrong` > 0; the bench still records the backend `ok`) are no results: the report says
// WRONG DATA at the top and in the Backends list (until 2026-11-30: "NCCL: **ok**"), and takes the average busbw
// again without them, beside the bench's own over every row (which counts them). A real scenario run with
// PICKLE_BENCH_CORRUPT=1 gives its backend the same words.
TEST(ReportColl, RowsOfWrongDataAreSaidAndLeftOutOfTheAverages) {
  TempDir dir("report-coll-wrong");
  std::string text = kTwoBackends;
  const std::string results = "\"results\": [";
  const std::size_t at = text.find(results);
  ASSERT_NE(at, std::string::npos);
  // NCCL's allreduce rows: 150 GB/s (right) and 200 GB/s (3 wrong elements); the bench averaged both.
  text.insert(at, R"("avg_busbw": [{"backend": "pickle", "collective": "allreduce", "busbw_gbps": 200},
                {"backend": "nccl", "collective": "allreduce", "busbw_gbps": 175}], )");
  const std::string synthetic = dir / "two.json";
  std::ofstream(synthetic) << text;
  const std::string flags = dir / "flags.json";
  Result bench = run_pickle(dir, {"bench", "scenario", "flags", "-n", "20", "-w", "1", "--memory", "host", "--json",
                                  flags},
                            std::chrono::seconds(60), {"PICKLE_BENCH_CORRUPT=1"});
  ASSERT_TRUE(bench.status.exited && bench.status.code == 1) << bench.status.describe() << "\n" << bench.err;

  const std::string out = dir / "out";
  Result report = run_pickle(dir, {"report", "-o", out, synthetic, flags}, std::chrono::seconds(90));
  ASSERT_TRUE(report.status.ok()) << report.status.describe() << "\n" << report.err;
  const std::string md = read_file(out + "/report.md");
  EXPECT_NE(md.find("**WRONG DATA**: the data check failed in NCCL: 1 row (#wrong 3 in all)."), std::string::npos)
      << md;
  EXPECT_NE(md.find("- NCCL: **WRONG DATA** in 1 row (#wrong 3 in all; recorded status **ok**: NCCL 2.28.9)\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("- NCCL: **ok**"), std::string::npos) << md;
  EXPECT_NE(md.find("- pickle: **ok**\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- pickle, allreduce: 200.0 GB/s\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- NCCL, allreduce: 150.0 GB/s over 1 row with right data (1 with **WRONG DATA** left out; the "
                    "bench's average over all of them: 175.0 GB/s)\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("- NCCL, allreduce: 175.0 GB/s"), std::string::npos) << md;
  // The scenario: its one row keeps its figures and its #wrong in bold, and pickle is not "ok".
  auto flag_rows = tables(md, "| Backend | all_gather_object us/call | all_reduce us/call | ratio | #wrong |");
  ASSERT_EQ(flag_rows.size(), 1u) << md;
  ASSERT_EQ(flag_rows[0].size(), 1u) << md;
  EXPECT_TRUE(flag_rows[0][0][4].starts_with("**")) << flag_rows[0][0][4];
  EXPECT_NE(md.find("**WRONG DATA**: the data check failed in pickle: 1 row (#wrong "), std::string::npos) << md;
  EXPECT_NE(md.find("- pickle: **WRONG DATA** in 1 row (#wrong "), std::string::npos) << md;
  EXPECT_EQ(check_plots(out, md), 2);  // the synthetic file's allreduce and alltoall
}

TEST(ReportColl, AResultWithoutItsPlacementIsNamed) {
  TempDir dir("report-coll-bad");
  const std::string bad = dir / "bad.json";
  std::ofstream(bad) << R"({"schema": "pickle-bench/1", "suite": "coll", "results": [{"backend": "pickle",
      "collective": "allreduce", "dtype": "float", "bytes": 4096}]})";
  Result r = run_pickle(dir, {"report", "-o", dir / "out", bad}, std::chrono::seconds(60));
  EXPECT_TRUE(r.status.exited && r.status.code == 1) << r.status.describe();
  EXPECT_NE(r.err.find(bad + ": results[0] lacks the key 'in_place'"), std::string::npos) << r.err;
}

TEST(ReportColl, SizesThatNoUnitWritesExactlyAreGivenInBytes) {
  // nccl-tests' sizes on 3 ranks are whole elements per rank: 64 KiB asked gives 3 x 5461 floats = 65532 bytes,
  // which "64 KiB" would misstate (and 1 MiB's 1048572 once printed as "1.02e+03 KiB").
  TempDir dir("report-coll-sizes");
  const std::string coll = dir / "coll.json";
  Result bench = run_pickle(dir,
                            {"bench", "coll", "-c", "allgather", "--ranks", "3", "--memory", "host", "-b", "64K", "-e",
                             "1M", "-f", "16", "-n", "1", "-w", "0", "--json", coll, "--backend", "pickle"},
                            std::chrono::seconds(60));
  ASSERT_TRUE(bench.status.ok()) << bench.status.describe() << "\n" << bench.err;
  const std::string out = dir / "out";
  Result report = run_pickle(dir, {"report", "-o", out, coll}, std::chrono::seconds(90));
  ASSERT_TRUE(report.status.ok()) << report.status.describe() << "\n" << report.err;
  const std::string md = read_file(out + "/report.md");
  auto found = tables(md, "| Size | pickle | #wrong | pickle local copies per call |");
  ASSERT_EQ(found.size(), 2u) << md;  // out-of-place and in-place
  for (const auto& table : found) {
    ASSERT_EQ(table.size(), 2u) << md;
    EXPECT_EQ(table[0][0], "65532 B") << md;
    EXPECT_EQ(table[1][0], "1048572 B") << md;
  }
}

}  // namespace
}  // namespace pickle::test
