#pragma once
// The result file of `pickle bench transports` (--json, schema "pickle-bench/1", "suite": "transports"; keys in
// docs/bench.md): every run of every configuration, the means over the runs and the gains.

#include "core/json.hpp"
#include "transports_results.hpp"

namespace pickle::bench {

/// The result file's content except "environment" and "topology", which write_result_file adds.
json::Value transports_to_json(const TransportsReport& report);

}  // namespace pickle::bench
