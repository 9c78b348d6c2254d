// `pickle info` as a user runs it: a separate process, its stdout, its exit code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "core/json.hpp"
#include "subprocess.hpp"

namespace pickle {
namespace {

struct CommandRun {
  test::ExitStatus status;
  std::string out;
  std::string err;
};

CommandRun run_pickle(const std::vector<std::string>& args) {
  auto dir = std::filesystem::temp_directory_path();
  static int runs = 0;  // tests of one binary run one at a time; the pid separates concurrent binaries
  std::string tag = std::to_string(getpid()) + "_" + std::to_string(runs++);
  std::string out_path = (dir / ("pickle_info_out_" + tag)).string();
  std::string err_path = (dir / ("pickle_info_err_" + tag)).string();
  std::vector<std::string> argv = {std::string(PICKLE_CLI_PATH)};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = test::spawn_program(argv, {}, out_path, err_path);
  CommandRun run;
  run.status = test::wait_pid_or_kill(pid, std::chrono::seconds(60));
  run.out = test::read_file(out_path);
  run.err = test::read_file(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return run;
}

TEST(InfoCommand, PrintsAReport) {
  CommandRun run = run_pickle({"info"});
  ASSERT_TRUE(run.status.ok()) << run.status.describe() << "\n" << run.err;
  for (const char* section : {"Host\n", "GPUs\n", "Versions\n", "hostname", "cuda runtime", "nccl", "libfabric"}) {
    EXPECT_NE(run.out.find(section), std::string::npos) << "missing '" << section << "' in:\n" << run.out;
  }
}

TEST(InfoCommand, JsonHasTheDocumentedShape) {
  CommandRun run = run_pickle({"info", "--json"});
  ASSERT_TRUE(run.status.ok()) << run.status.describe() << "\n" << run.err;
  json::Value info = json::parse(run.out);  // throws (and fails the test) on anything but one JSON document
  const char* order[] = {"schema", "host", "gpus", "no_gpu_reason", "links", "nvml", "versions", "transports"};
  ASSERT_EQ(info.size(), std::size(order)) << run.out;
  for (std::size_t i = 0; i < std::size(order); ++i) EXPECT_EQ(info.as_object()[i].key, order[i]);
  EXPECT_EQ(info.at("schema").as_string(), "pickle-info/1");
  // One entry per GPU pair; without GPUs one, for host-memory ranks, which map each other's memory (ipc).
  const json::Value& transports = info.at("transports");
  const std::size_t gpu_count = info.at("gpus").size();
  ASSERT_EQ(transports.size(), gpu_count == 0 ? 1u : gpu_count * (gpu_count - 1) / 2) << run.out;
  if (gpu_count == 0) {
    EXPECT_EQ(transports.at(0).at("pair").as_string(), "host ranks");
    EXPECT_EQ(transports.at(0).at("transport").as_string(), "ipc");
  }
  const json::Value& host = info.at("host");
  EXPECT_FALSE(host.at("hostname").as_string().empty());
  EXPECT_GE(host.at("logical_cores").as_int(), 1);
  EXPECT_GT(host.at("memory_bytes").as_int(), 0);
  EXPECT_TRUE(host.at("numa_nodes").is_array());
  std::size_t gpus = info.at("gpus").size();
  if (gpus == 0) {
    EXPECT_FALSE(info.at("no_gpu_reason").as_string().empty());
  } else {
    EXPECT_TRUE(info.at("no_gpu_reason").is_null());
    EXPECT_FALSE(info.at("gpus").at(0).at("name").as_string().empty());
  }
  EXPECT_EQ(info.at("links").size(), gpus * (gpus > 0 ? gpus - 1 : 0));
  EXPECT_TRUE(info.at("nvml").at("available").is_bool());
  const json::Value& versions = info.at("versions");
  EXPECT_FALSE(versions.at("pickle").as_string().empty());
  // In a git checkout (CI's clone, a developer's tree) with git installed, the build recorded its commit.
  EXPECT_FALSE(versions.at("pickle_revision").as_string().empty());
  const bool git_checkout = std::filesystem::exists(PICKLE_SOURCE_DIR "/.git") &&
                            std::system("git --version >/dev/null 2>&1") == 0 &&
                            std::getenv("PICKLE_SOURCE_REVISION") == nullptr;
  if (git_checkout) {
    EXPECT_NE(versions.at("pickle_revision").as_string(), "unknown");
  }
  for (const char* library : {"nccl", "libfabric"}) {
    const json::Value& entry = versions.at(library);
    EXPECT_EQ(entry.at("found").as_bool(), entry.at("version").is_string()) << library;
    EXPECT_FALSE(entry.at("detail").as_string().empty()) << library;
  }
}

TEST(InfoCommand, TextAndJsonAgree) {
  CommandRun text = run_pickle({"info"});
  CommandRun json_run = run_pickle({"info", "--json"});
  ASSERT_TRUE(text.status.ok() && json_run.status.ok()) << text.err << json_run.err;
  json::Value info = json::parse(json_run.out);
  EXPECT_NE(text.out.find(info.at("host").at("hostname").as_string()), std::string::npos);
  if (info.at("gpus").size() == 0) {
    // The CPU-only machine's promise: "no GPU: <reason>", and still exit 0.
    std::string line = "no GPU: " + info.at("no_gpu_reason").as_string() + "\n";
    EXPECT_NE(text.out.find(line), std::string::npos) << "expected '" << line << "' in:\n" << text.out;
  } else {
    for (const auto& gpu : info.at("gpus").as_array()) {
      EXPECT_NE(text.out.find(gpu.at("pci_bus_id").as_string()), std::string::npos) << text.out;
    }
    for (const auto& link : info.at("links").as_array()) {
      EXPECT_NE(text.out.find(link.at("label").as_string()), std::string::npos) << text.out;
    }
  }
}

// `pickle version` as every other command: the version, its --help, and exit 2 for an option it does not know
// (until 2026-11-30 it printed the version and exited 0 whatever followed).
TEST(VersionCommand, PrintsTheVersionAndRefusesOptions) {
  CommandRun plain = run_pickle({"version"});
  ASSERT_TRUE(plain.status.ok()) << plain.status.describe() << "\n" << plain.err;
  EXPECT_EQ(plain.out.rfind("pickle ", 0), 0u) << plain.out;
  CommandRun dashes = run_pickle({"--version"});
  EXPECT_EQ(dashes.out, plain.out);
  CommandRun bad = run_pickle({"version", "--x"});
  EXPECT_TRUE(bad.status.exited && bad.status.code == 2) << bad.status.describe();
  EXPECT_NE(bad.err.find("pickle version: takes no options (got '--x')"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;
  CommandRun help = run_pickle({"version", "--help"});
  EXPECT_TRUE(help.status.ok()) << help.status.describe();
  EXPECT_NE(help.out.find("usage: pickle version"), std::string::npos) << help.out;
}

TEST(InfoCommand, BadOptionExitsTwo) {
  CommandRun run = run_pickle({"info", "--bogus"});
  EXPECT_TRUE(run.status.exited);
  EXPECT_EQ(run.status.code, 2) << run.status.describe();
  EXPECT_NE(run.err.find("unknown option '--bogus'"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("usage: pickle info"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;

  CommandRun help = run_pickle({"info", "--help"});
  EXPECT_TRUE(help.status.ok()) << help.status.describe();
  EXPECT_NE(help.out.find("--json"), std::string::npos);
}

}  // namespace
}  // namespace pickle
