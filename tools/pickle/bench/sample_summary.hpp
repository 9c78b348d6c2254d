#pragma once
// The median, smallest and largest of a series of measurements (repeats of one size): what every suite's table and
// result file shows. Header-only, so that any suite (and its tests) can use it without another source to link.

#include <algorithm>
#include <vector>

namespace pickle::bench {

/// Median, min and max of one quantity over the repeats.
struct Summary {
  double median = 0, min = 0, max = 0;
};

/// The summary of `values` (all 0 when there are none).
inline Summary summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  s.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  s.min = values.front();
  s.max = values.back();
  return s;
}

}  // namespace pickle::bench
