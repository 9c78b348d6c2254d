#include "progress.hpp"

#include <utility>

namespace pickle::bench {
namespace {
constexpr double kQuietSeconds = 3.0;    // sweeps shorter than this print nothing
constexpr double kEverySeconds = 2.0;    // at most one line this often
}  // namespace

Progress::Progress(double total_work, int total_steps, std::FILE* out, bool enabled, std::string label)
    : total_(total_work), total_steps_(total_steps), out_(out), enabled_(enabled), label_(std::move(label)) {}

void Progress::step(double work, const std::string& what) {
  done_ += work;
  ++steps_;
  if (!enabled_) return;
  double elapsed = watch_.seconds();
  if (elapsed < kQuietSeconds || elapsed - last_print_ < kEverySeconds) return;
  last_print_ = elapsed;
  double left = done_ > 0 && total_ > done_ ? elapsed * (total_ - done_) / done_ : 0;
  std::fprintf(out_, "%s: %s done (step %d of %d), %.0f s elapsed, about %.0f s left\n", label_.c_str(), what.c_str(), steps_,
               total_steps_, elapsed, left);
  std::fflush(out_);
}

}  // namespace pickle::bench
