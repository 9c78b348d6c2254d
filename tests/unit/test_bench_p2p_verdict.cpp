// `pickle bench p2p`'s verdict: a run fails (exit 1) on a wrong byte, a failed step or backend, and on a timed
// repeat of pickle's that mapped a peer allocation: the steady state must open nothing (issue 3's figure), so a
// regression to an open per transfer must not pass as merely slower.
#include <gtest/gtest.h>

#include "../../tools/pickle/bench/p2p_report.hpp"

namespace pickle::bench {
namespace {

P2pReport report_with(StepResult step) {
  P2pReport report;
  report.backends.push_back({.name = step.backend, .status = BackendRun::Status::Ok, .detail = ""});
  report.steps.push_back(std::move(step));
  return report;
}

StepResult clean_step() {
  StepResult step;
  step.backend = "pickle";
  step.bytes = 4096;
  step.iterations = 20;
  step.time_us = {5.0, 5.1, 5.2};
  step.wrong = 0;
  step.mapping_opens = 0;
  return step;
}

TEST(BenchP2pVerdict, ACleanRunPasses) { EXPECT_EQ(report_with(clean_step()).exit_code(), 0); }

TEST(BenchP2pVerdict, AWrongByteFails) {
  StepResult step = clean_step();
  step.wrong = 1;
  EXPECT_EQ(report_with(step).exit_code(), 1);
}

TEST(BenchP2pVerdict, AMappingOpenedDuringTheTimedRepeatsFails) {
  StepResult step = clean_step();
  step.mapping_opens = 2;
  EXPECT_EQ(report_with(step).exit_code(), 1);
  step.mapping_opens.reset();  // backends that do not count opens (ce, nccl)
  EXPECT_EQ(report_with(step).exit_code(), 0);
}

}  // namespace
}  // namespace pickle::bench
