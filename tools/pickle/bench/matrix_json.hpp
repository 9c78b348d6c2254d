#pragma once
// The result file of `pickle bench matrix` (--json; docs/bench.md): the common head, the options, the matrices and
// every child. write_result_file adds the environment and the topology.

#include "core/json.hpp"
#include "matrix_results.hpp"

namespace pickle::bench {

json::Value matrix_to_json(const MatrixReport& report);

}  // namespace pickle::bench
