#pragma once
// The verdict on a job of rank processes (run_ranks): every rank must have exited 0, and each one that did not is
// named with how it ended.

#include <gtest/gtest.h>

#include <vector>

#include "subprocess.hpp"

namespace pickle::test {

inline void expect_all_ok(const std::vector<ExitStatus>& statuses) {
  for (std::size_t rank = 0; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << " " << statuses[rank].describe();
  }
}

}  // namespace pickle::test
