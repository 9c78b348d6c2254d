#pragma once
// The GPU part of `pickle bench compute`: sets every foreground up on the chosen GPU and times it. CUDA builds only.

#include "compute_report.hpp"

namespace pickle::bench {

/// Fills report.device_name and report.results from report.options: per foreground, set-up (its check included),
/// -r repeats of -n iterations (the first after the warm-up), then the count of output elements that changed from
/// its first result. A foreground's own failure is recorded in its result; CudaError when the GPU cannot be used.
void measure_compute(ComputeReport& report);

}  // namespace pickle::bench
