// `pickle bench interference --lanes`: the parts of the orchestrator that need no GPU, on synthetic input. Its flags
// (--lanes, --iface only with it, p2p only), a child's command line made from the user's (the flags the orchestrator
// sets itself dropped with their values, every other passed through), each child's environment (seed 001's network
// configurations, overriding the caller's), and merging children's result files (written by the suite's own JSON
// writer) into one report: lanes on every row and traffic run, a failed child a failed traffic run that says why.
// The real command on this GPU-less machine: waived, without starting children.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/interference_lanes_args.hpp"
#include "../../tools/pickle/bench/interference_lanes_merge.hpp"
#include "../../tools/pickle/bench/interference_options.hpp"
#include "../../tools/pickle/bench/interference_report.hpp"
#include "bench_test_util.hpp"
#include "core/json.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

using bench::InterferenceOptions;
using bench::parse_interference_options;

const std::string kNoGpu = "CUDA_VISIBLE_DEVICES=";

void write_text(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    parse_interference_options(args);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

TEST(InterferenceLanes, OptionsReadTheListAndRefuseWhatCannotBeMeasured) {
  InterferenceOptions o = parse_interference_options({"--lanes", "1,2,4"});
  EXPECT_EQ(o.lanes, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(o.iface, "lo");
  EXPECT_TRUE(parse_interference_options({}).lanes.empty());
  o = parse_interference_options({"--iface", "eth0", "--lanes", "3", "--share-gpus"});
  EXPECT_EQ(o.lanes, (std::vector<int>{3}));
  EXPECT_EQ(o.iface, "eth0");
  EXPECT_TRUE(o.share_gpus);
  EXPECT_EQ(parse_interference_options({"--lanes", "2", "--background", "p2p"}).lanes, (std::vector<int>{2}));

  EXPECT_NE(error_of({"--iface", "eth0"}).find("--iface: only with --lanes"), std::string::npos);
  EXPECT_NE(error_of({"--lanes", "1", "--background", "allgather"}).find("--lanes: only with --background p2p"),
            std::string::npos);
  EXPECT_NE(error_of({"--lanes", "1", "--background", "p2p,allgather"}).find("--lanes: only with --background p2p"),
            std::string::npos);
  EXPECT_NE(error_of({"--lanes", "0"}).find("--lanes 0: must be between 1 and 16"), std::string::npos);
  EXPECT_NE(error_of({"--lanes", "17"}).find("--lanes 17"), std::string::npos);
  EXPECT_NE(error_of({"--lanes", "1,x"}).find("--lanes"), std::string::npos);
  EXPECT_NE(error_of({"--lanes", "1", "--iface", ""}).find("--iface"), std::string::npos);
}

TEST(InterferenceLanes, AChildGetsTheUsersFlagsWithItsOwnBackendBackgroundAndResultFile) {
  const std::vector<std::string> user = {"--lanes", "1,2", "--foreground", "gemm", "--json", "mine.json",
                                         "--backend", "pickle,nccl", "--iface", "eth0", "--share-gpus", "-b", "4M",
                                         "--background", "p2p", "-n", "3", "--warmup-ms", "0"};
  EXPECT_EQ(bench::lanes_child_arguments(user, "nccl", "/scratch/lanes2-nccl.json"),
            (std::vector<std::string>{"bench", "interference", "--foreground", "gemm", "--share-gpus", "-b", "4M",
                                      "-n", "3", "--warmup-ms", "0", "--backend", "nccl", "--background", "p2p",
                                      "--json", "/scratch/lanes2-nccl.json"}));
  // A value that looks like a flag stays with its flag: "--share-gpus" as the user's file name is dropped with
  // --json, and "--lanes" as a value of --foreground (which the parser would refuse) is not taken for the flag.
  EXPECT_EQ(bench::lanes_child_arguments({"--json", "--share-gpus", "--lanes", "1", "--attention", "own"}, "pickle",
                                         "c.json"),
            (std::vector<std::string>{"bench", "interference", "--attention", "own", "--backend", "pickle",
                                      "--background", "p2p", "--json", "c.json"}));
  EXPECT_EQ(bench::lanes_child_arguments({"--lanes", "1", "-e", "--lanes"}, "pickle", "c.json"),
            (std::vector<std::string>{"bench", "interference", "-e", "--lanes", "--backend", "pickle",
                                      "--background", "p2p", "--json", "c.json"}));
}

TEST(InterferenceLanes, EachChildIsForcedOntoItsLibrarysNetworkPath) {
  const InterferenceOptions o =
      parse_interference_options({"--lanes", "1,2", "--backend", "pickle,nccl", "--iface", "eth7"});
  const std::vector<bench::LanesChild> children = bench::plan_lanes_children(o);
  ASSERT_EQ(children.size(), 4u);
  const std::pair<int, std::string> order[] = {{1, "pickle"}, {1, "nccl"}, {2, "pickle"}, {2, "nccl"}};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(children[i].lanes, order[i].first) << i;
    EXPECT_EQ(children[i].backend, order[i].second) << i;
    EXPECT_EQ(children[i].config.backend, order[i].second) << i;
  }
  // The caller's own choices must not turn a configuration into another.
  const std::vector<std::string> base = {"PATH=/bin", "NCCL_NET=IB", "PICKLE_TRANSPORT=ipc", "PICKLE_NET_LANES=9",
                                         "NCCL_NVLS_ENABLE=1"};
  EXPECT_EQ(bench::child_environment(base, children[2].config),
            (std::vector<std::string>{"PATH=/bin", "NCCL_NET=IB", "NCCL_NVLS_ENABLE=0", "PICKLE_TRANSPORT=net",
                                      "PICKLE_NET_IFACE=eth7", "PICKLE_NET_LANES=2"}));
  EXPECT_EQ(bench::child_environment(base, children[1].config),
            (std::vector<std::string>{"PATH=/bin", "PICKLE_TRANSPORT=ipc", "PICKLE_NET_LANES=9", "NCCL_NVLS_ENABLE=0",
                                      "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", "NCCL_NET=Socket",
                                      "NCCL_SOCKET_IFNAME=eth7", "NCCL_SOCKET_NTHREADS=1",
                                      "NCCL_NSOCKS_PERTHREAD=1", "NCCL_NCHANNELS_PER_NET_PEER=1"}));
  // The same configurations as `bench transports --lanes`: one definition for both.
  EXPECT_EQ(children[3].config.key, "nccl-socket-2");
  EXPECT_EQ(children[0].config.key, "pickle-net-1");
  EXPECT_THROW(bench::network_configuration("ce", 1, "lo"), InvalidArgument);
}

/// A measured p2p row of rank 1.
bench::InterferenceRow measured_row(const std::string& foreground, const std::string& backend, std::size_t bytes,
                                    double relative, double gbps) {
  bench::InterferenceRow row;
  row.foreground = foreground;
  row.background = "p2p";
  row.backend = backend;
  row.bytes = bytes;
  bench::RankMeasurement r;
  r.rank = 1;
  r.alone_before_ms = r.alone_after_ms = 1.5;
  r.with_ms = 1.5 / relative;
  r.window.gbps = gbps;
  r.window.overlap = true;
  r.window.window_ms = 150;
  r.window.messages = 40;
  r.window.lead_ms = r.window.tail_ms = 5;
  r.background_wrong = 0;
  r.foreground_wrong = 0;
  row.ranks.push_back(r);
  return row;
}

/// What a child of `child` writes: the suite's own JSON with the environment write_result_file would record.
json::Value child_file(const bench::LanesChild& child, bench::RunStatus status, const std::string& detail,
                       const std::vector<bench::InterferenceRow>& rows) {
  bench::InterferenceReport report;
  report.options = parse_interference_options({"--foreground", "gemm", "--backend", child.backend});
  report.command = {"pickle", "bench", "interference"};
  report.world_size = 2;
  report.sizes = {4u << 20};
  report.notes = {"a note every child makes"};
  bench::ForegroundInfo gemm;
  gemm.name = "gemm";
  gemm.description = "cuBLASLt bf16 8192x8192x8192";
  report.foregrounds.push_back(gemm);
  report.traffic.push_back({"p2p", child.backend, status, detail, 0, {}});
  report.rows = rows;
  json::Value root = bench::interference_to_json(report);
  json::Value env = json::Value::object();
  env["NCCL_NVLS_ENABLE"] = "0";
  for (const auto& [name, value] : child.config.set) env[name] = value;
  root["environment"] = std::move(env);
  return root;
}

bench::ChildOutcome exited(int code) {
  bench::ChildOutcome outcome;
  outcome.exited = true;
  outcome.exit_code = code;
  outcome.seconds = 12;
  return outcome;
}

struct Merge {
  TempDir dir{"interference-lanes"};
  bench::InterferenceReport report;
  int count = 0;

  Merge() {
    report.options = parse_interference_options({"--lanes", "1,2", "--foreground", "gemm", "--iface", "lo"});
  }
  /// Merges a child that wrote `file` (nothing when null) and `stderr_text`, and ended as `outcome`.
  void add(const bench::LanesChild& child, const json::Value& file, const bench::ChildOutcome& outcome,
           const std::string& stderr_text = "") {
    const std::string stem = dir / std::to_string(count++);
    if (!file.is_null()) write_text(stem + ".json", file.dump(2));
    write_text(stem + ".err", stderr_text);
    bench::merge_lanes_child(report, child, outcome, stem + ".json", stem + ".err");
  }
};

TEST(InterferenceLanes, ChildrenMergeIntoOneReportWithLanesOnEveryRowAndRun) {
  const auto children =
      bench::plan_lanes_children(parse_interference_options({"--lanes", "1,2", "--backend", "pickle,nccl"}));
  Merge merge;
  const std::size_t mib4 = 4u << 20, mib16 = 16u << 20;
  for (const auto& child : children) {
    const double relative = child.backend == "pickle" ? 0.99 : 0.95 - 0.01 * child.lanes;
    const std::vector<bench::InterferenceRow> rows = {
        measured_row("gemm", child.backend, mib4, relative, 1.0 * child.lanes),
        measured_row("gemm", child.backend, mib16, relative - 0.01, 2.0 * child.lanes)};
    merge.add(child, child_file(child, bench::RunStatus::Ok, "detail of " + child.backend, rows), exited(0));
  }
  const bench::InterferenceReport& report = merge.report;
  EXPECT_EQ(report.exit_code(), 0);
  ASSERT_EQ(report.traffic.size(), 4u);
  ASSERT_EQ(report.rows.size(), 8u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(report.traffic[i].lanes, children[i].lanes);
    EXPECT_EQ(report.traffic[i].backend, children[i].backend);
    EXPECT_EQ(report.traffic[i].status, bench::RunStatus::Ok);
    EXPECT_EQ(report.traffic[i].detail, "detail of " + children[i].backend);
    EXPECT_EQ(report.traffic[i].env, children[i].config.set);
    for (std::size_t r = 2 * i; r < 2 * i + 2; ++r) {
      EXPECT_EQ(report.rows[r].lanes, children[i].lanes) << r;
      EXPECT_EQ(report.rows[r].backend, children[i].backend) << r;
      EXPECT_EQ(report.rows[r].env, children[i].config.set) << r;
      EXPECT_TRUE(report.rows[r].passed()) << r;
    }
  }
  EXPECT_EQ(report.sizes, (std::vector<std::size_t>{mib4, mib16}));
  EXPECT_EQ(report.notes, (std::vector<std::string>{"a note every child makes"}));
  ASSERT_EQ(report.foregrounds.size(), 1u);
  EXPECT_EQ(report.world_size, 2);

  // The merged file: options.lanes and iface, lanes and env on every row and traffic run, and rows that read back.
  const json::Value root = bench::interference_to_json(report);
  EXPECT_EQ(root.at("options").at("lanes").dump(), "[1,2]");
  EXPECT_EQ(root.at("options").at("iface").as_string(), "lo");
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  for (const auto& t : root.at("traffic").as_array()) {
    EXPECT_GT(t.at("lanes").as_int(), 0);
    EXPECT_EQ(t.at("env").at(t.at("backend").as_string() == "nccl" ? "NCCL_SOCKET_NTHREADS" : "PICKLE_NET_LANES")
                  .as_string(),
              std::to_string(t.at("lanes").as_int()));
  }
  for (const auto& row : root.at("results").as_array()) {
    const bench::InterferenceRow back = bench::row_from_json(row);
    EXPECT_GT(back.lanes, 0);
    EXPECT_FALSE(back.env.empty());
    EXPECT_EQ(row.at("env").size(), back.env.size());
  }

  // The table has a lanes column, and each traffic line its lane count.
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  bench::print_interference_table(report, out);
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  EXPECT_NE(text.find(" backend lanes         size"), std::string::npos) << text;
  EXPECT_NE(text.find("# p2p       nccl   lanes 2 ok: detail of nccl"), std::string::npos) << text;
  const auto rows = table_rows(text);
  ASSERT_EQ(rows.size(), 8u) << text;
  EXPECT_EQ(rows[6][2], "nccl");
  EXPECT_EQ(rows[6][3], "2");
  EXPECT_EQ(rows[6][4], std::to_string(mib4));
}

TEST(InterferenceLanes, ARowsOwnFailureInAChildFailsTheMergedReport) {
  const auto children = bench::plan_lanes_children(parse_interference_options({"--lanes", "1", "--backend", "nccl"}));
  Merge merge;
  bench::InterferenceRow wrong = measured_row("gemm", "nccl", 4096, 0.9, 1.0);
  wrong.ranks[0].background_wrong = 3;
  // The child exits 1 and its file says why (3 wrong bytes): its traffic run stays as it said, the row fails the run.
  merge.add(children[0], child_file(children[0], bench::RunStatus::Ok, "", {wrong}), exited(1), "some progress\n");
  EXPECT_EQ(merge.report.exit_code(), 1);
  ASSERT_EQ(merge.report.traffic.size(), 1u);
  EXPECT_EQ(merge.report.traffic[0].status, bench::RunStatus::Ok) << merge.report.traffic[0].detail;
  ASSERT_EQ(merge.report.rows.size(), 1u);
  EXPECT_FALSE(merge.report.rows[0].passed());
}

TEST(InterferenceLanes, AFailedChildBecomesAFailedTrafficRunThatSaysWhy) {
  const auto children =
      bench::plan_lanes_children(parse_interference_options({"--lanes", "1,2", "--backend", "pickle"}));
  const auto& one = children[0];
  const auto& two = children[1];
  {
    // No result file at all: how it ended, that it wrote none, and its stderr's last lines on one line.
    Merge merge;
    merge.add(one, json::Value(), exited(1), "rank 1: net transport: fi_getinfo failed\nrank 0: aborted\n");
    ASSERT_EQ(merge.report.traffic.size(), 1u);
    const bench::TrafficRun& run = merge.report.traffic[0];
    EXPECT_EQ(run.status, bench::RunStatus::Failed);
    EXPECT_EQ(run.lanes, 1);
    EXPECT_EQ(run.backend, "pickle");
    EXPECT_NE(run.detail.find("`pickle bench interference --backend pickle` with 1 lane(s) exited with code 1: it "
                              "wrote no result file"),
              std::string::npos)
        << run.detail;
    EXPECT_NE(run.detail.find("its stderr, last lines: rank 1: net transport: fi_getinfo failed | rank 0: aborted"),
              std::string::npos)
        << run.detail;
    EXPECT_EQ(merge.report.exit_code(), 1);
    const json::Value root = bench::interference_to_json(merge.report);
    EXPECT_EQ(root.at("traffic").at(0).at("status").as_string(), "failed");
    EXPECT_EQ(root.at("traffic").at(0).at("lanes").as_int(), 1);
  }
  {
    // A good file, but the child was killed: failed, its rows kept.
    Merge merge;
    bench::ChildOutcome killed;
    killed.signal = 9;
    merge.add(two, child_file(two, bench::RunStatus::Ok, "", {measured_row("gemm", "pickle", 4096, 0.99, 1)}), killed);
    EXPECT_EQ(merge.report.traffic[0].status, bench::RunStatus::Failed);
    EXPECT_NE(merge.report.traffic[0].detail.find("was killed by signal 9"), std::string::npos);
    EXPECT_EQ(merge.report.rows.size(), 1u);
    EXPECT_EQ(merge.report.rows[0].lanes, 2);
    EXPECT_EQ(merge.report.exit_code(), 1);
  }
  {
    // Exit 0, but the environment that forces the network path did not reach it: its rows measured something else.
    Merge merge;
    json::Value file = child_file(one, bench::RunStatus::Ok, "", {});
    file["environment"]["PICKLE_TRANSPORT"] = "ipc";
    merge.add(one, file, exited(0));
    EXPECT_EQ(merge.report.traffic[0].status, bench::RunStatus::Failed);
    EXPECT_NE(merge.report.traffic[0].detail.find("does not record PICKLE_TRANSPORT=net"), std::string::npos)
        << merge.report.traffic[0].detail;
  }
  {
    // Exit 1 where the file records 0; exit 1 with a file that records 1 but names nothing that failed; a file that
    // is not the suite's.
    Merge merge;
    json::Value file = child_file(one, bench::RunStatus::Ok, "", {});
    merge.add(one, file, exited(1));
    EXPECT_EQ(merge.report.traffic[0].status, bench::RunStatus::Failed);
    EXPECT_NE(merge.report.traffic[0].detail.find("its result file records exit code 0"), std::string::npos)
        << merge.report.traffic[0].detail;
    file["exit_code"] = 1;
    merge.add(one, file, exited(1));
    EXPECT_EQ(merge.report.traffic[1].status, bench::RunStatus::Failed);
    EXPECT_NE(merge.report.traffic[1].detail.find("names nothing that failed"), std::string::npos)
        << merge.report.traffic[1].detail;
    merge.add(two, json::Value("not an object"), exited(0));
    EXPECT_EQ(merge.report.traffic[2].status, bench::RunStatus::Failed);
    EXPECT_NE(merge.report.traffic[2].detail.find("its result file is unusable"), std::string::npos)
        << merge.report.traffic[2].detail;
  }
}

TEST(InterferenceLanes, AnUnavailableBackendStaysUnavailableWithItsReason) {
  const auto children = bench::plan_lanes_children(parse_interference_options({"--lanes", "1", "--backend", "nccl"}));
  Merge merge;
  merge.add(children[0],
            child_file(children[0], bench::RunStatus::Unavailable, "2 ranks share 1 GPU(s): NCCL needs a GPU per rank",
                       {}),
            exited(0));
  ASSERT_EQ(merge.report.traffic.size(), 1u);
  EXPECT_EQ(merge.report.traffic[0].status, bench::RunStatus::Unavailable);
  EXPECT_EQ(merge.report.traffic[0].detail, "2 ranks share 1 GPU(s): NCCL needs a GPU per rank");
  EXPECT_EQ(merge.report.exit_code(), 0);
  // Without a reason in its file, the child's stderr says why.
  merge.add(children[0], child_file(children[0], bench::RunStatus::Unavailable, "", {}), exited(0),
            "bench interference: nccl: libnccl.so.2 not found\n");
  EXPECT_EQ(merge.report.traffic[1].detail, "bench interference: nccl: libnccl.so.2 not found");
}

TEST(BenchInterferenceLanes, WithoutTwoGpusItIsWaivedWithoutStartingChildren) {
  TempDir dir("interference-lanes");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "interference", {"--lanes", "1,2", "-n", "3", "--json", json_path}, {kNoGpu});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_EQ(run.out, "interference: waived: needs 2 CUDA GPUs (found 0)\n") << run.describe();
  EXPECT_EQ(run.err.find("child"), std::string::npos) << "no child starts: " << run.err;
  const json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("suite").as_string(), "interference");
  EXPECT_EQ(root.at("waived").as_string(), "needs 2 CUDA GPUs (found 0)");
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  EXPECT_EQ(root.at("results").size(), 0u);
  EXPECT_EQ(root.at("traffic").size(), 0u);
  EXPECT_EQ(root.at("options").at("lanes").dump(), "[1,2]");
  EXPECT_EQ(root.at("options").at("iface").as_string(), "lo");
}

TEST(BenchInterferenceLanes, BadLanesFlagsExitTwoAndALauncherIsRefused) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--iface", "lo"}, std::vector<std::string>{"--lanes", "1", "--background", "allgather"},
        std::vector<std::string>{"--lanes", "0"}}) {
    TempDir dir("interference-lanes");
    BenchRun run = run_bench(dir, "interference", args, {kNoGpu});
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << args[0] << ": " << run.describe();
    EXPECT_NE(run.err.find("usage: pickle bench interference"), std::string::npos) << run.err;
  }
  TempDir dir("interference-lanes");
  BenchRun run = run_bench(dir, "interference", {"--lanes", "1"}, {kNoGpu, "RANK=0", "WORLD_SIZE=2"});
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.describe();
  EXPECT_NE(run.err.find("--lanes starts its own process sets"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace pickle::test
