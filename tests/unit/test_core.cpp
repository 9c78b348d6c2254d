#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <type_traits>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/error_text.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle {
namespace {

TEST(Error, CarriesCodeAndPrefixedMessage) {
  TimeoutError error("rank 1: barrier of 0 bytes");
  EXPECT_EQ(error.code(), ErrorCode::Timeout);
  EXPECT_STREQ(error.what(), "pickle Timeout error: rank 1: barrier of 0 bytes");
  const Error& base = error;
  EXPECT_EQ(base.code(), ErrorCode::Timeout);
  EXPECT_EQ(base.message(), "rank 1: barrier of 0 bytes");  // without the head, for a sentence of the caller's
}

// An exception whose copy can throw ends the process when it is copied while being thrown (std::terminate).
static_assert(std::is_nothrow_copy_constructible_v<Error> && std::is_nothrow_copy_constructible_v<PeerError>);

TEST(Error, SystemErrorAppendsStrerror) {
  SystemError error("open /nope", ENOENT);
  EXPECT_EQ(error.errno_value(), ENOENT);
  EXPECT_NE(std::string(error.what()).find("No such file or directory"), std::string::npos);
  EXPECT_EQ(error.message(), "open /nope: No such file or directory");
}

TEST(Error, RethrownWithAPrefixKeepsItsClassAndPeerAndIsNotPrefixedTwice) {
  try {
    rethrow_with_prefix(PeerError("rank 1 went away", 1), "recv from rank 1");
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer(), 1);
    EXPECT_EQ(e.message(), "recv from rank 1: rank 1 went away");
    try {
      rethrow_with_prefix(e, "recv from rank 1");
    } catch (const PeerError& again) {
      EXPECT_EQ(again.message(), "recv from rank 1: rank 1 went away");
    }
  }
}

TEST(Format, DescribeNamesRankPeerOpAndSize) {
  EXPECT_EQ(describe({.rank = 0, .peer = 3, .op = "send", .bytes = 4096}), "rank 0 -> peer 3: send of 4096 bytes");
  EXPECT_EQ(describe({.rank = 2, .op = "barrier"}), "rank 2: barrier");
  EXPECT_EQ(describe({.op = "alloc", .bytes = 0}), "alloc of 0 bytes");
}

TEST(Format, HumanBytes) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(4096), "4 KiB");
  EXPECT_EQ(human_bytes(3ull << 29), "1.50 GiB");
}

TEST(Env, DefaultsAndOverrides) {
  unsetenv("PICKLE_TIMEOUT");
  EXPECT_EQ(env::get("PICKLE_TIMEOUT"), "60");
  EXPECT_DOUBLE_EQ(env::timeout_seconds(), 60.0);
  setenv("PICKLE_TIMEOUT", "2.5", 1);
  EXPECT_DOUBLE_EQ(env::timeout_seconds(), 2.5);
  setenv("PICKLE_TIMEOUT", "soon", 1);
  EXPECT_THROW(env::timeout_seconds(), InvalidArgument);
  setenv("PICKLE_TIMEOUT", "-1", 1);
  EXPECT_THROW(env::timeout_seconds(), InvalidArgument);
  setenv("PICKLE_TIMEOUT", "1e9", 1);  // "forever": the longest wait pickle takes
  EXPECT_DOUBLE_EQ(env::timeout_seconds(), kMaxWaitSeconds);
  unsetenv("PICKLE_TIMEOUT");
}

TEST(Env, UnknownNameIsABug) {
  EXPECT_THROW(env::get("PICKLE_NOT_IN_TABLE"), Error);
}

TEST(Log, ParseConfigLevelsAndSubsystems) {
  auto config = log::parse_config("info", "bootstrap,device");
  EXPECT_TRUE(config.allows(log::Level::Info, "bootstrap"));
  EXPECT_TRUE(config.allows(log::Level::Warn, "device"));
  EXPECT_FALSE(config.allows(log::Level::Debug, "bootstrap"));
  EXPECT_FALSE(config.allows(log::Level::Info, "topology"));
  EXPECT_TRUE(config.allows(log::Level::Error, "topology"));  // errors always pass the filter
  EXPECT_FALSE(log::parse_config("", "").allows(log::Level::Info, "x"));
  EXPECT_THROW(log::parse_config("loud", ""), InvalidArgument);
  EXPECT_TRUE(log::parse_config("INFO", "").allows(log::Level::Info, "x"));  // any case
}

TEST(Clock, AHugeTimeoutIsClampedNotWrapped) {
  // poll() takes an int of milliseconds; 3e6 s would wrap it negative (and a u32 on the store's wire).
  auto deadline = Deadline::after_seconds(3e6);
  EXPECT_GT(deadline.remaining_ms(), 0);
  EXPECT_LE(deadline.remaining_ms(), static_cast<int>(kMaxWaitSeconds * 1000));
  EXPECT_GT(Deadline::after_seconds(1e300).remaining_ms(), 0);
  EXPECT_EQ(Deadline::after_seconds(-5).remaining_ms(), 0);
  EXPECT_EQ(Deadline(std::chrono::milliseconds(std::int64_t{1} << 40)).remaining_ms(), std::numeric_limits<int>::max());
}

TEST(Clock, DeadlineExpires) {
  Stopwatch watch;  // first: a preemption between the two lines must not make the deadline look early
  auto deadline = Deadline(std::chrono::milliseconds(200));
  EXPECT_FALSE(deadline.expired());
  while (!deadline.expired()) {
  }
  EXPECT_GE(watch.seconds(), 0.199);
  EXPECT_EQ(deadline.remaining_ms(), 0);
}

}  // namespace
}  // namespace pickle
