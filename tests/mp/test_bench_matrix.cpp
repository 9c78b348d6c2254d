// `pickle bench matrix` end to end on host memory: the real command starts a `pickle bench p2p` child per ordered
// pair of three host-memory "devices", reads their result files back, prints the matrices and writes its own result
// file. NCCL cannot run on host memory: its matrices are unavailable with the reason, and pickle and ce run, so the
// whole orchestration runs here. Also: a child with wrong bytes fails its cells and the suite, and bad flags exit 2.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>

#include "bench_test_util.hpp"
#include "core/json.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

const std::vector<std::string> kSmall = {"--memory", "host", "--gpus", "3", "-b", "64K", "-n", "2", "-w", "1",
                                         "--repeats", "1"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

/// The rows printed under the heading "# <mode>, <backend>: ...": each row's words (the sender, then the cells).
std::vector<std::vector<std::string>> printed_matrix(const std::string& out, const std::string& heading) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# ") && line.find(": ") != std::string::npos && !line.starts_with("#  S\\R")) {
      inside = line.starts_with("# " + heading + ": ");
      continue;
    }
    if (!inside || line.starts_with("#")) continue;
    std::istringstream cells(line);
    std::vector<std::string> words;
    for (std::string w; cells >> w;) words.push_back(w);
    rows.push_back(words);
  }
  return rows;
}

// Names by value: reference parameters bound to temporaries ("nccl") make GCC 13+ warn that the returned reference
// may dangle (-Wdangling-reference), although it points into `root`.
const json::Value& matrix_of(const json::Value& root, std::string_view mode, std::string_view backend) {
  for (const auto& m : root.at("matrices").as_array()) {
    if (m.at("mode").as_string() == mode && m.at("backend").as_string() == backend) return m;
  }
  throw std::runtime_error("no matrix " + std::string(mode) + " " + std::string(backend));
}

TEST(BenchMatrix, HostMemoryFillsEveryPairAndMarksNcclUnavailable) {
  TempDir dir("bench-matrix");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "matrix", with(kSmall, {"--backend", "pickle,ce,nccl", "--json", json_path}));
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.err.find("pair 6 of 6 (GPU 2 -> GPU 1)"), std::string::npos) << run.err;

  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("suite").as_string(), "matrix");
  EXPECT_EQ(root.at("exit_code").as_int(), 0);
  EXPECT_EQ(root.at("devices").as_int(), 3);
  EXPECT_EQ(root.at("size").as_int(), 65536);
  EXPECT_EQ(root.at("options").at("memory").as_string(), "host");
  EXPECT_TRUE(root.at("topology").contains("host"));
  EXPECT_TRUE(root.at("environment").contains("PICKLE_TIMEOUT"));
  ASSERT_EQ(root.at("matrices").size(), 6u);  // uni and bi x pickle, ce, nccl
  for (const std::string mode : {"uni", "bi"}) {
    for (const std::string backend : {"pickle", "ce"}) {
      const json::Value& m = matrix_of(root, mode, backend);
      const std::string what = mode + " " + backend;
      EXPECT_EQ(m.at("status").as_string(), "ok") << what << ": " << m.at("detail").as_string();
      ASSERT_EQ(m.at("gbps").size(), 3u) << what;
      for (std::size_t i = 0; i < 3; ++i) {
        ASSERT_EQ(m.at("gbps").at(i).size(), 3u) << what;
        for (std::size_t j = 0; j < 3; ++j) {
          const json::Value& cell = m.at("gbps").at(i).at(j);
          if (i == j) {
            EXPECT_TRUE(cell.is_null()) << what;
            EXPECT_TRUE(m.at("wrong").at(i).at(j).is_null()) << what;
            continue;
          }
          EXPECT_GT(cell.as_double(), 0) << what << " " << i << "->" << j;
          EXPECT_EQ(m.at("wrong").at(i).at(j).as_int(), 0) << what;
          // bi measures both directions at once: one number for the pair.
          if (mode == "bi") {
            EXPECT_EQ(cell.as_double(), m.at("gbps").at(j).at(i).as_double()) << what;
          }
        }
      }
      // The printed matrix: a row per sender, "-" on the diagonal, a number elsewhere.
      auto rows = printed_matrix(run.out, mode + ", " + backend);
      ASSERT_EQ(rows.size(), 3u) << what << "\n" << run.out;
      for (std::size_t i = 0; i < 3; ++i) {
        ASSERT_EQ(rows[i].size(), 4u) << run.out;
        EXPECT_EQ(rows[i][0], std::to_string(i));
        for (std::size_t j = 0; j < 3; ++j) {
          if (i == j) {
            EXPECT_EQ(rows[i][1 + j], "-") << run.out;
          } else {
            EXPECT_GE(std::stod(rows[i][1 + j]), 0) << run.out;
          }
        }
      }
    }
    const json::Value& nccl = matrix_of(root, mode, "nccl");
    EXPECT_EQ(nccl.at("status").as_string(), "unavailable");
    EXPECT_NE(nccl.at("detail").as_string().find("nccl needs GPU memory"), std::string::npos);
    // Nothing was checked there: no 0 that reads as "checked, nothing wrong" (until 2026-11-30).
    for (const auto& row : nccl.at("wrong").as_array()) {
      for (const auto& cell : row.as_array()) EXPECT_TRUE(cell.is_null()) << mode;
    }
    EXPECT_NE(run.out.find("# nccl unavailable: "), std::string::npos) << run.out;
    EXPECT_EQ(printed_matrix(run.out, mode + ", pickle/ce").size(), 3u) << run.out;
  }
  EXPECT_NE(run.out.find("# #wrong: 0 "), std::string::npos) << run.out;

  // Six children: each pair i < j as i,j (uni and bi) and as j,i (uni).
  const auto& pairs = root.at("pairs").as_array();
  ASSERT_EQ(pairs.size(), 6u);
  int uni = 0;
  for (const auto& p : pairs) {
    const auto sender = p.at("sender").as_int(), receiver = p.at("receiver").as_int();
    EXPECT_EQ(p.at("status").as_string(), "ok") << p.at("detail").as_string();
    EXPECT_EQ(p.at("env").at("CUDA_VISIBLE_DEVICES").as_string(),
              std::to_string(sender) + "," + std::to_string(receiver));
    EXPECT_EQ(p.at("env").at("NCCL_NVLS_ENABLE").as_string(), "0");
    EXPECT_EQ(p.at("command").at(2).as_string(), "p2p");
    EXPECT_EQ(p.at("modes").size(), sender < receiver ? 2u : 1u);
    uni += p.at("modes").at(0).as_string() == "uni";
  }
  EXPECT_EQ(uni, 6);
}

TEST(BenchMatrix, AChildWithWrongBytesFailsItsCellsAndTheSuite) {
  TempDir dir("bench-matrix-corrupt");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "matrix", with(kSmall, {"--backend", "pickle", "--mode", "uni", "--json", json_path}),
                           {"PICKLE_BENCH_CORRUPT=1"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  EXPECT_NE(run.err.find("GPU 0 -> GPU 1 FAILED: `pickle bench p2p` for GPU 0 -> GPU 1 (pickle uni) exited with code 1: "
                         "1 wrong byte at 64K"),
            std::string::npos)
      << run.err;
  auto rows = printed_matrix(run.out, "uni, pickle");
  ASSERT_EQ(rows.size(), 3u) << run.out;
  EXPECT_EQ(rows[0][2], "FAILED") << run.out;
  json::Value root = json::parse(read_file(json_path));
  EXPECT_EQ(root.at("exit_code").as_int(), 1);
  const json::Value& m = matrix_of(root, "uni", "pickle");
  EXPECT_EQ(m.at("status").as_string(), "failed");
  EXPECT_TRUE(m.at("gbps").at(0).at(1).is_null());
  EXPECT_EQ(m.at("wrong").at(0).at(1).as_int(), 1);
  EXPECT_EQ(root.at("pairs").at(0).at("status").as_string(), "failed");
}

TEST(BenchMatrix, BadFlagsExitWithTwoAndStartNothing) {
  const std::vector<std::vector<std::string>> cases = {
      {"--gpus", "1"}, {"--mode", "sideways"}, {"--backend", "mpi"}, {"-b", "1M", "-e", "2M"}, {"-f", "2"},
      {"--bogus"}};
  for (const auto& args : cases) {
    TempDir dir("bench-matrix-bad");
    BenchRun run = run_bench(dir, "matrix", args);
    EXPECT_TRUE(run.status.exited && run.status.code == 2) << args[0] << ": " << run.describe();
    EXPECT_NE(run.err.find("usage: pickle bench matrix"), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_EQ(run.err.find("pair 1 of"), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
}

// A bad PICKLE_TIMEOUT is the environment's fault: exit 1, said once, no usage and no pair started. Until 2026-11-30
// the orchestrator found it after its first progress line and took it for a bad command line (exit 2, usage).
TEST(BenchMatrix, ABadTimeoutIsASetUpErrorSaidBeforeAnything) {
  TempDir dir("bench-matrix-timeout");
  BenchRun run = run_bench(dir, "matrix", {"-b", "64K", "-n", "2", "-w", "1", "--mode", "uni", "--backend", "ce"},
                           {"PICKLE_TIMEOUT=abc"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  EXPECT_EQ(count_of(run.err, "PICKLE_TIMEOUT='abc' is not a number"), 1u) << run.err;
  EXPECT_EQ(run.err.find("usage:"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("pair 1 of"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

// A size no pair's buffers can fit in host memory: said once, before the first pair (until 2026-11-30 every pair's
// child was started and failed with the same set-up error, six times here).
TEST(BenchMatrix, ASizeBeyondHostMemoryIsRefusedOnceBeforeAnyPair) {
  TempDir dir("bench-matrix-huge");
  BenchRun run = run_bench(dir, "matrix", {"-b", "1T", "-n", "1", "-w", "1", "--repeats", "1", "--mode", "uni",
                                           "--backend", "ce", "--memory", "host"});
  EXPECT_TRUE(run.status.exited && run.status.code == 1) << run.describe();
  EXPECT_EQ(count_of(run.err, "the smallest size, 1T, does not fit"), 1u) << run.err;
  EXPECT_EQ(run.err.find("pair 1 of"), std::string::npos) << run.err;
}

TEST(BenchMatrix, CudaMemoryWithoutTwoGpusIsWaived) {
  TempDir dir("bench-matrix-waived");
  const std::string json_path = dir / "result.json";
  BenchRun run = run_bench(dir, "matrix", {"--memory", "cuda", "--json", json_path}, {"CUDA_VISIBLE_DEVICES="});
  ASSERT_TRUE(run.status.ok()) << run.describe();
  EXPECT_NE(run.out.find("# matrix: waived: --memory cuda needs 2 CUDA GPUs (found 0"), std::string::npos) << run.out;
  json::Value root = json::parse(read_file(json_path));
  EXPECT_FALSE(root.at("waived").is_null());
  EXPECT_EQ(root.at("pairs").size(), 0u);
}

}  // namespace
}  // namespace pickle::test
