#pragma once
// What every row of `pickle bench interference --json` must show when its run went well, checked the same way by the
// GPU tests of the suite (one background per row, or one per lane count).

#include <gtest/gtest.h>

#include <string>

#include "core/json.hpp"

namespace pickle::test {

/// The row measured: no error, the background overlapped the whole window and moved data, every byte of both the
/// background and the foreground checked out, and the row passed. `where` names the row in failures.
inline void expect_clean_row(const json::Value& row, const std::string& where) {
  EXPECT_TRUE(row.at("error").is_null()) << where;
  EXPECT_TRUE(row.at("overlap").as_bool()) << where;
  EXPECT_EQ(row.at("background_wrong").as_int(), 0) << where;
  EXPECT_EQ(row.at("foreground_wrong").as_int(), 0) << where;
  EXPECT_GT(row.at("background_gbps").as_double(), 0) << where;
  EXPECT_GT(row.at("relative").as_double(), 0) << where;
  EXPECT_TRUE(row.at("passed").as_bool()) << where;
}

}  // namespace pickle::test
