#pragma once
// The children of `pickle bench matrix`: for each pair of devices i < j, `pickle bench p2p --ranks 2` with
// CUDA_VISIBLE_DEVICES=i,j (uni i -> j, bi i <-> j) and with CUDA_VISIBLE_DEVICES=j,i (uni j -> i), one at a time,
// each read back into the matrices' cells.

#include "matrix_results.hpp"

namespace pickle::bench {

/// Runs every child of `report` (its options, memory, devices and size set) and fills its matrices and pairs.
/// Throws SystemError when a child cannot be started at all (its scratch folder, fork, exec).
void run_matrix_children(MatrixReport& report);

}  // namespace pickle::bench
