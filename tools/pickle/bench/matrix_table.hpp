#pragma once
// The human output of `pickle bench matrix` (stdout): a header (machine, memory, size, method), then per mode and
// backend an nvbandwidth-style matrix (row = sender, column = receiver, GB/s), the ratio matrices pickle/nccl and
// pickle/ce, and the wrong bytes.

#include <cstdio>

#include "matrix_results.hpp"

namespace pickle::bench {

void print_matrix_tables(const MatrixReport& report, std::FILE* out);

}  // namespace pickle::bench
