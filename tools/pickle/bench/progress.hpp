#pragma once
// Progress of a long sweep on stderr: quiet for the first seconds (short runs print nothing), then a line now and
// then with the step, the elapsed time and an estimate of what is left.

#include <cstdio>
#include <string>

#include "core/clock.hpp"

namespace pickle::bench {

class Progress {
 public:
  /// `total_work`: the sum of the weights of every step (any unit: the estimate is proportional); `total_steps`:
  /// how many steps there are.
  /// `label` starts each line ("bench p2p").
  Progress(double total_work, int total_steps, std::FILE* out, bool enabled, std::string label = "bench p2p");

  /// One step of `work` finished; `what` names it ("nccl uni 1M").
  void step(double work, const std::string& what);

 private:
  double total_, done_ = 0;
  int total_steps_;
  std::FILE* out_;
  bool enabled_;
  std::string label_;
  int steps_ = 0;
  Stopwatch watch_;
  double last_print_ = 0;
};

}  // namespace pickle::bench
