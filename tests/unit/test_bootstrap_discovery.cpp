// Rank discovery from launcher environments (set in-process and restored), Slurm list parsing, and the token.

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "bootstrap/rank_discovery.hpp"
#include "bootstrap/token.hpp"

namespace pickle {
namespace {

/// Clears every variable discovery reads, sets the given ones, and restores the original environment on exit, so
/// that neither the machine's own launcher variables nor one test's settings leak into another.
class ScopedEnv {
 public:
  ScopedEnv() : ScopedEnv(std::map<std::string, std::string>{}) {}
  explicit ScopedEnv(const std::map<std::string, std::string>& values) {
    static const char* const kNames[] = {
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
        "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID", "SLURM_JOB_ID", "SLURM_JOBID",
        "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
        "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PICKLE_TOKEN"};
    for (const char* name : kNames) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      unsetenv(name);
    }
    for (const auto& [name, value] : values) {
      if (!saved_.contains(name)) ADD_FAILURE() << name << " is not in ScopedEnv's list";
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

/// Asserts that discovery fails with an InvalidArgument whose message contains `needle` (the variable's name).
void expect_invalid(const std::map<std::string, std::string>& values, const std::string& needle) {
  ScopedEnv env(values);
  try {
    RankInfo info = discover_rank_info();
    ADD_FAILURE() << "discovered rank " << info.rank << " of " << info.world_size << " instead of failing on "
                  << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(RankDiscovery, NoLauncherIsAWorldOfOne) {
  ScopedEnv env;
  RankInfo info = discover_rank_info();
  EXPECT_EQ(info.source, "single");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.master_port, 0);
}

TEST(RankDiscovery, Torchrun) {
  ScopedEnv env({{"RANK", "5"},
                 {"WORLD_SIZE", "8"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "4"},
                 {"MASTER_ADDR", "node17"},
                 {"MASTER_PORT", "29500"},
                 {"TORCHELASTIC_RUN_ID", "abc"}});
  RankInfo info = discover_rank_info();
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.master_addr, "node17");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(info.job_id, "abc");
}

TEST(RankDiscovery, TorchrunLocalDefaultsToOneHost) {
  ScopedEnv env({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", "1234"}});
  RankInfo info = discover_rank_info();
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.local_world_size, 3);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
}

TEST(RankDiscovery, TorchrunInvalidValuesNameTheVariable) {
  const std::map<std::string, std::string> good = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](std::map<std::string, std::string> changes, bool erase = false) {
    auto values = good;
    for (auto& [k, v] : changes) {
      if (erase) values.erase(k);
      else values[k] = v;
    }
    return values;
  };
  expect_invalid(with({{"RANK", "abc"}}), "RANK='abc'");
  expect_invalid(with({{"RANK", "-1"}}), "RANK=-1");
  expect_invalid(with({{"RANK", "2"}}), "RANK=2 is not below WORLD_SIZE=2");
  expect_invalid(with({{"RANK", "1 "}}), "RANK='1 '");
  expect_invalid(with({{"WORLD_SIZE", "0"}}), "WORLD_SIZE=0");
  expect_invalid(with({{"WORLD_SIZE", ""}}, true), "WORLD_SIZE is not set");
  expect_invalid(with({{"MASTER_PORT", ""}}, true), "MASTER_PORT is not set");
  expect_invalid(with({{"MASTER_PORT", "70000"}}), "MASTER_PORT=70000");
  expect_invalid(with({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}), "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
  expect_invalid(with({{"LOCAL_WORLD_SIZE", "3"}}), "LOCAL_WORLD_SIZE=3 is larger than WORLD_SIZE=2");
  // Two hosts and no MASTER_ADDR: there is no address to guess.
  auto no_addr = with({{"LOCAL_WORLD_SIZE", "1"}});
  no_addr.erase("MASTER_ADDR");
  expect_invalid(no_addr, "MASTER_ADDR is not set");
}

TEST(RankDiscovery, SlurmWithNodelistAndDerivedPort) {
  ScopedEnv env({{"SLURM_PROCID", "3"},
                 {"SLURM_NTASKS", "8"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_NODEID", "1"},
                 {"SLURM_TASKS_PER_NODE", "2(x4)"},
                 {"SLURM_JOB_ID", "123456"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_STEP_NODELIST", "gpu[07-10],login1"}});
  RankInfo info = discover_rank_info();
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.job_id, "123456.0");
  EXPECT_EQ(info.master_addr, "gpu07");
  EXPECT_EQ(info.master_port, bootstrap::port_from_job_id("123456.0"));
  EXPECT_GE(info.master_port, 20000);
  EXPECT_LT(info.master_port, 30000);
}

TEST(RankDiscovery, SlurmUnevenNodesAndExplicitMaster) {
  ScopedEnv env({{"SLURM_PROCID", "6"},
                 {"SLURM_NTASKS", "7"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "3"},
                 {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                 {"SLURM_JOB_ID", "9"},
                 {"SLURM_STEP_NODELIST", "a[1-4]"},
                 {"MASTER_ADDR", "10.1.2.3"},
                 {"MASTER_PORT", "4242"}});
  RankInfo info = discover_rank_info();
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.master_addr, "10.1.2.3");
  EXPECT_EQ(info.master_port, 4242);
}

TEST(RankDiscovery, SlurmInvalidValuesNameTheVariable) {
  const std::map<std::string, std::string> good = {{"SLURM_PROCID", "1"},       {"SLURM_NTASKS", "2"},
                                                   {"SLURM_LOCALID", "1"},      {"SLURM_TASKS_PER_NODE", "2"},
                                                   {"SLURM_JOB_ID", "77"},      {"SLURM_STEP_NODELIST", "n1"}};
  auto with = [&](const std::string& k, const std::string& v) {
    auto values = good;
    if (v.empty()) values.erase(k);
    else values[k] = v;
    return values;
  };
  expect_invalid(with("SLURM_PROCID", "2"), "SLURM_PROCID=2 is not below SLURM_NTASKS=2");
  expect_invalid(with("SLURM_NTASKS", ""), "SLURM_NTASKS is not set");
  expect_invalid(with("SLURM_NTASKS", "two"), "SLURM_NTASKS='two'");
  expect_invalid(with("SLURM_LOCALID", ""), "SLURM_LOCALID is not set");
  expect_invalid(with("SLURM_TASKS_PER_NODE", "2(3)"), "SLURM_TASKS_PER_NODE='2(3)'");
  expect_invalid(with("SLURM_TASKS_PER_NODE", ""), "SLURM_TASKS_PER_NODE is not set");
  expect_invalid(with("SLURM_STEP_NODELIST", "n[1-"), "SLURM_STEP_NODELIST='n[1-'");
  auto far_node = good;
  far_node["SLURM_NODEID"] = "4";
  expect_invalid(far_node, "SLURM_NODEID=4");
  auto no_port = with("SLURM_JOB_ID", "");
  expect_invalid(no_port, "MASTER_PORT is not set");
}

TEST(RankDiscovery, OpenMpiSingleHostDerivesLoopbackAndPort) {
  ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "1"},
                 {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                 {"OMPI_MCA_orte_ess_jobid", "3735879681"}});
  RankInfo info = discover_rank_info();
  EXPECT_EQ(info.source, "openmpi");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.job_id, "3735879681");
  EXPECT_EQ(info.master_port, bootstrap::port_from_job_id("3735879681"));
}

TEST(RankDiscovery, OpenMpiPmixNamespaceAndErrors) {
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"PMIX_NAMESPACE", "prterun-host-1234@1"}});
    EXPECT_EQ(discover_rank_info().job_id, "prterun-host-1234@1");
  }
  expect_invalid({{"OMPI_COMM_WORLD_RANK", "0"},
                  {"OMPI_COMM_WORLD_SIZE", "4"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                  {"PMIX_NAMESPACE", "x"}},
                 "MASTER_ADDR is not set");
  expect_invalid({{"OMPI_COMM_WORLD_RANK", "0"},
                  {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                 "MASTER_PORT is not set");
  expect_invalid({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, "OMPI_COMM_WORLD_RANK='x'");
}

TEST(RankDiscovery, FirstLauncherWins) {
  {
    // torchrun inside an mpirun or srun step: RANK is per process, the others are not.
    ScopedEnv env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "5000"}, {"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "1"}, {"SLURM_PROCID", "0"}});
    EXPECT_EQ(discover_rank_info().source, "torchrun");
  }
  {
    // mpirun inside an sbatch script: every rank inherits the batch step's SLURM_PROCID=0.
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"MASTER_PORT", "5000"},
                   {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
    RankInfo info = discover_rank_info();
    EXPECT_EQ(info.source, "openmpi");
    EXPECT_EQ(info.rank, 3);
  }
}

TEST(SlurmNodelist, Expands) {
  using bootstrap::expand_slurm_nodelist;
  EXPECT_EQ(expand_slurm_nodelist("node[01-04],x", "V"),
            (std::vector<std::string>{"node01", "node02", "node03", "node04", "x"}));
  EXPECT_EQ(expand_slurm_nodelist("single", "V"), (std::vector<std::string>{"single"}));
  EXPECT_EQ(expand_slurm_nodelist("a[1,3-4]b,c[9-10]", "V"),
            (std::vector<std::string>{"a1b", "a3b", "a4b", "c9", "c10"}));
  EXPECT_EQ(expand_slurm_nodelist("rack[1-2]-gpu[1-2]", "V"),
            (std::vector<std::string>{"rack1-gpu1", "rack1-gpu2", "rack2-gpu1", "rack2-gpu2"}));
  EXPECT_EQ(expand_slurm_nodelist("n[008-011]", "V"), (std::vector<std::string>{"n008", "n009", "n010", "n011"}));
}

TEST(SlurmNodelist, RejectsMalformedAndHuge) {
  using bootstrap::expand_slurm_nodelist;
  for (const char* bad : {"node[01-", "node]", "node[a-b]", "node[5-1]", "node[]", "a,,b", "", "n[[1]]", "n[1-2",
                          "n[1]]", "n[-3]", "n[1-]"}) {
    try {
      expand_slurm_nodelist(bad, "SLURM_STEP_NODELIST");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_STEP_NODELIST"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(expand_slurm_nodelist("n[0-999999999]", "V"), InvalidArgument);
  EXPECT_THROW(expand_slurm_nodelist("a[1-300]b[1-300]", "V", 1000), InvalidArgument);
}

TEST(SlurmTasksPerNode, Parses) {
  using bootstrap::parse_slurm_tasks_per_node;
  EXPECT_EQ(parse_slurm_tasks_per_node("2(x3),1", "V"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(parse_slurm_tasks_per_node("4", "V"), (std::vector<int>{4}));
  EXPECT_EQ(parse_slurm_tasks_per_node("1,3(x2)", "V"), (std::vector<int>{1, 3, 3}));
  for (const char* bad : {"", "2(x)", "x", "2(3)", "2(x3", "0", "2,", "(x2)", "2(x0)", "2(x99999999)"}) {
    EXPECT_THROW(parse_slurm_tasks_per_node(bad, "V"), InvalidArgument) << bad;
  }
}

TEST(BootstrapToken, DerivedFromTheJobAndOverridable) {
  RankInfo a;
  a.master_addr = "10.0.0.1";
  a.master_port = 29500;
  a.world_size = 4;
  a.job_id = "77";
  RankInfo b = a;
  b.rank = 3;  // the rank is not part of the token: every rank must compute the same one
  EXPECT_EQ(bootstrap::derive_token(a), bootstrap::derive_token(b));
  for (auto change : {+[](RankInfo& r) { r.master_port = 29501; }, +[](RankInfo& r) { r.world_size = 5; },
                      +[](RankInfo& r) { r.job_id = "78"; }, +[](RankInfo& r) { r.master_addr = "10.0.0.2"; }}) {
    RankInfo c = a;
    change(c);
    EXPECT_NE(bootstrap::derive_token(a), bootstrap::derive_token(c));
  }
  {
    ScopedEnv env(std::map<std::string, std::string>{{"PICKLE_TOKEN", "s3cret"}});
    EXPECT_EQ(bootstrap::job_token(a), "s3cret");
  }
  ScopedEnv env;
  EXPECT_EQ(bootstrap::job_token(a), bootstrap::derive_token(a));
}

TEST(BootstrapToken, ConstantTimeEqual) {
  using bootstrap::constant_time_equal;
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal(std::string_view("ab\0", 3), "ab"));
}

}  // namespace
}  // namespace pickle
