#pragma once
// The Topology as JSON, for `pickle info --json` and the environment section of benchmark result files.
// The keys are documented in docs/info.md; renaming one is a format change for every reader of old results.

#include "core/json.hpp"
#include "topology/topology.hpp"

namespace pickle::topology {

/// {"host", "gpus", "no_gpu_reason", "links", "nvml", "versions"}: see docs/info.md.
json::Value to_json(const Topology& topology);

}  // namespace pickle::topology
