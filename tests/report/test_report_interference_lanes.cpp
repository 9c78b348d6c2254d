// `pickle report` for a `pickle bench interference --lanes` file: a synthetic result (the keys the orchestrator
// writes: lanes and env on every row and traffic run) of gemm under p2p network traffic at 1, 2 and 4 lanes, pickle
// and NCCL, 16 MiB and 1 GiB, with NCCL's 4-lane child failed. report.md must hold seed 001 item 4's table per size,
// lanes | pickle | NCCL | ratio, with pickle's relative throughput over NCCL's, the failed child's cells as skipped,
// and one plot of relative throughput vs lanes.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "report_test_util.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::string kLanesHeader = "| lanes | pickle | NCCL | ratio |";

json::Value env_of(const std::string& backend, int lanes) {
  json::Value env = json::Value::object();
  if (backend == "pickle") {
    env["PICKLE_TRANSPORT"] = "net";
    env["PICKLE_NET_IFACE"] = "lo";
    env["PICKLE_NET_LANES"] = std::to_string(lanes);
  } else {
    env["NCCL_NET"] = "Socket";
    env["NCCL_SOCKET_IFNAME"] = "lo";
    env["NCCL_SOCKET_NTHREADS"] = std::to_string(lanes);
  }
  return env;
}

/// Relative throughput of a backend at a lane count and size: pickle near 1, NCCL a little lower, more with lanes.
double relative_of(const std::string& backend, int lanes, std::int64_t bytes) {
  const double big = bytes > (std::int64_t{64} << 20) ? 1 : 0;
  return backend == "pickle" ? 0.996 - 0.001 * lanes * big : 0.986 - 0.01 * lanes * big;
}

json::Value lanes_result() {
  json::Value root = json::Value::object();
  root["schema"] = "pickle-bench/1";
  root["suite"] = "interference";
  root["command"] = json::Value(json::Array{"pickle", "bench", "interference", "--lanes", "1,2,4", "--foreground",
                                            "gemm", "-b", "16M", "-e", "1G", "-f", "64"});
  root["started_utc"] = "2026-11-25T03:04:05Z";
  json::Value options = json::Value::object();
  options["min_bytes"] = 16 << 20;
  options["max_bytes"] = 1 << 30;
  options["factor"] = 64;
  options["iterations"] = 100;
  options["warmup"] = 20;
  options["depth"] = 8;
  options["check"] = true;
  options["foregrounds"] = json::Value(json::Array{"gemm"});
  options["backends"] = json::Value(json::Array{"pickle", "nccl"});
  options["backgrounds"] = json::Value(json::Array{"p2p"});
  options["lanes"] = json::Value(json::Array{1, 2, 4});
  options["iface"] = "lo";
  root["options"] = std::move(options);
  root["waived"] = nullptr;
  root["notes"] = json::Value::array();
  json::Value gemm = json::Value::object();
  gemm["name"] = "gemm";
  gemm["description"] = "cuBLASLt bf16 8192x8192x8192, fp32 accumulate";
  gemm["status"] = "ok";
  gemm["detail"] = "";
  gemm["flops"] = 1099511627776.0;
  root["foregrounds"] = json::Value(json::Array{gemm});
  json::Value traffic = json::Value::array();
  json::Value results = json::Value::array();
  for (int lanes : {1, 2, 4}) {
    for (const std::string backend : {"pickle", "nccl"}) {
      const bool failed = backend == "nccl" && lanes == 4;
      json::Value t = json::Value::object();
      t["background"] = "p2p";
      t["backend"] = backend;
      t["status"] = failed ? "failed" : "ok";
      t["detail"] = failed ? "`pickle bench interference --backend nccl` with 4 lane(s) exited with code 1: it wrote "
                             "no result file"
                           : "";
      t["lanes"] = lanes;
      t["env"] = env_of(backend, lanes);
      traffic.push_back(std::move(t));
      if (failed) continue;
      for (const std::int64_t bytes : {std::int64_t{16} << 20, std::int64_t{1} << 30}) {
        const double relative = relative_of(backend, lanes, bytes);
        json::Value r = json::Value::object();
        r["foreground"] = "gemm";
        r["background"] = "p2p";
        r["backend"] = backend;
        r["bytes"] = bytes;
        r["ranks"] = 1;
        r["t_alone_ms"] = 1.55;
        r["t_with_ms"] = 1.55 / relative;
        r["relative"] = relative;
        r["relative_min"] = relative;
        r["relative_max"] = relative;
        r["background_gbps"] = (backend == "pickle" ? 4.5 : 3.0) * lanes;
        r["overlap"] = true;
        r["window"] = nullptr;
        r["background_wrong"] = 0;
        r["foreground_wrong"] = 0;
        r["per_rank"] = json::Value::array();
        r["passed"] = true;
        r["error"] = nullptr;
        r["lanes"] = lanes;
        r["env"] = env_of(backend, lanes);
        results.push_back(std::move(r));
      }
    }
  }
  root["traffic"] = std::move(traffic);
  root["results"] = std::move(results);
  root["exit_code"] = 1;
  return root;
}

TEST(ReportInterferenceLanes, ALanesRunGivesTheSeedsTableAndAPlotVsLanes) {
  TempDir dir("report-interference-lanes");
  const std::string path = dir / "lanes.json";
  std::ofstream(path) << lanes_result().dump(2);
  const std::string out = dir / "out";
  Result report = run_pickle(dir, {"report", path, "-o", out}, std::chrono::seconds(90));
  ASSERT_TRUE(report.status.ok()) << report.status.describe() << "\n" << report.err;
  const std::string md = read_file(out + "/report.md");

  auto found = tables(md, kLanesHeader);
  ASSERT_EQ(found.size(), 2u) << "one table per message size\n" << md;
  EXPECT_NE(md.find("### gemm under network p2p traffic, 16 MiB messages, by lanes"), std::string::npos) << md;
  EXPECT_NE(md.find("### gemm under network p2p traffic, 1 GiB messages, by lanes"), std::string::npos) << md;
  const auto& largest = found[1];
  ASSERT_EQ(largest.size(), 3u) << md;
  EXPECT_EQ(largest[0], (std::vector<std::string>{"1", "0.995 (4.50 GB/s)", "0.976 (3.00 GB/s)", "1.019"}));
  EXPECT_EQ(largest[1], (std::vector<std::string>{"2", "0.994 (9.00 GB/s)", "0.966 (6.00 GB/s)", "1.029"}));
  // NCCL's 4-lane child failed: its cell says the run was skipped, and there is no ratio.
  EXPECT_EQ(largest[2], (std::vector<std::string>{"4", "0.992 (18.00 GB/s)", "skipped", "—"}));
  EXPECT_EQ(found[0][0], (std::vector<std::string>{"1", "0.996 (4.50 GB/s)", "0.986 (3.00 GB/s)", "1.010"}));
  // The traffic runs name their lane count; the method says how the children were forced onto the network.
  EXPECT_NE(md.find("- p2p via NCCL, 4 lane(s): **failed**: `pickle bench interference --backend nccl` with 4 lane(s)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- p2p via pickle, 2 lane(s): **ok**"), std::string::npos) << md;
  EXPECT_NE(md.find("forced onto its library's network path over lo"), std::string::npos) << md;
  EXPECT_NE(md.find("Relative throughput vs lanes at the largest message size, 1 GiB"), std::string::npos) << md;
  // No size tables of the plain run: sizes repeat across lane counts there.
  EXPECT_EQ(md.find("| Size | pickle | NCCL |"), std::string::npos) << md;
  EXPECT_EQ(check_plots(out, md), 1);
  EXPECT_NE(md.find("lanes-gemm-lanes.png"), std::string::npos) << md;
}

}  // namespace
}  // namespace pickle::test
