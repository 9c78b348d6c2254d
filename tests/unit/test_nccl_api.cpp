// The benchmark's NCCL binding without a GPU: the configuration struct it hands to ncclCommInitRankConfig has
// nccl.h's layout (checked against the header where the build machine has one), and against the libnccl.so.2 the
// loader finds (where there is one): its version decides whether the zero-SM mode ("nccl-zero") can run, and the
// default configuration never claims a newer layout than the library's.
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <iostream>
#include <optional>
#include <string>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/nccl_api.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define PICKLE_TEST_HAVE_NCCL_H 1
#endif

namespace pickle::bench {
namespace {

#ifdef PICKLE_TEST_HAVE_NCCL_H
#if NCCL_VERSION_CODE >= 22800
// Field by field: a shifted CTAPolicy would silently configure something else.
static_assert(sizeof(NcclConfig) == sizeof(ncclConfig_t));
static_assert(offsetof(NcclConfig, magic) == offsetof(ncclConfig_t, magic));
static_assert(offsetof(NcclConfig, version) == offsetof(ncclConfig_t, version));
static_assert(offsetof(NcclConfig, blocking) == offsetof(ncclConfig_t, blocking));
static_assert(offsetof(NcclConfig, netName) == offsetof(ncclConfig_t, netName));
static_assert(offsetof(NcclConfig, commName) == offsetof(ncclConfig_t, commName));
static_assert(offsetof(NcclConfig, CTAPolicy) == offsetof(ncclConfig_t, CTAPolicy));
static_assert(offsetof(NcclConfig, nvlinkCentricSched) == offsetof(ncclConfig_t, nvlinkCentricSched));
static_assert(kNcclCtaPolicyZero == NCCL_CTA_POLICY_ZERO);
static_assert(kNcclWinCollSymmetric == NCCL_WIN_COLL_SYMMETRIC);
#endif
#endif

TEST(NcclApi, ConfigurationLayoutIsNcclHeaders) {
#if !defined(PICKLE_TEST_HAVE_NCCL_H)
  GTEST_SKIP() << "no nccl.h on this build machine: the layout is checked where there is one";
#elif NCCL_VERSION_CODE < 22800
  GTEST_SKIP() << "nccl.h is older than 2.28 (" << NCCL_VERSION_CODE << "): its ncclConfig_t is a prefix of ours";
#else
  // The static_asserts above did the work; the initializer's values must match default_config()'s too.
  ncclConfig_t reference = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(reference.magic, 0xcafebeefu);
  EXPECT_EQ(reference.CTAPolicy, INT_MIN);
#endif
}

TEST(NcclApi, TheLoadedLibrarySaysWhetherItHasTheZeroSmMode) {
  std::optional<NcclApi> api;
  try {
    api.emplace(NcclApi::load());
  } catch (const UnavailableError& e) {
    GTEST_SKIP() << "no libnccl.so.2 here: " << e.what();
  }
  const NcclConfig config = api->default_config();
  EXPECT_EQ(config.size, sizeof(NcclConfig));
  EXPECT_EQ(config.magic, 0xcafebeefu);
  EXPECT_GT(config.version, 0u);
  EXPECT_LE(config.version, 22800u) << "the struct has 2.28's layout: never claim a newer one";
  EXPECT_EQ(config.CTAPolicy, INT_MIN);
  EXPECT_EQ(config.blocking, INT_MIN);
  EXPECT_EQ(config.netName, nullptr);

  const std::string problem = api->zero_cta_problem();
  const std::string& version = api->version();  // "2.28.9"
  const int minor = std::stoi(version.substr(version.find('.') + 1));
  if (version.rfind("2.", 0) == 0 && minor < 27) {
    EXPECT_NE(problem.find("needs NCCL 2.27 or newer"), std::string::npos) << problem;
    EXPECT_NE(problem.find(version), std::string::npos) << problem;
  } else {
    EXPECT_EQ(problem, "") << "NCCL " << version << " at " << api->path();
    EXPECT_NE(api->mem_alloc, nullptr);
    EXPECT_NE(api->comm_window_register, nullptr);
  }
  std::cout << "NCCL " << version << " (" << api->path() << "): zero-SM mode "
            << (problem.empty() ? "available" : problem) << "\n";
}

}  // namespace
}  // namespace pickle::bench
