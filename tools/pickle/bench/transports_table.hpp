#pragma once
// The human tables of `pickle bench transports` (stdout): per operation, seed 000's table (configuration | run 1 |
// ... | mean at the largest size | gain), then the means per size with the three gains as ratios.

#include <cstdio>

#include "transports_results.hpp"

namespace pickle::bench {

/// Prints every operation's two tables, the failures under them, and the notes.
void print_transports_tables(const TransportsReport& report, std::FILE* out);

/// A gain as the table writes it: "1.15x (+14.9%)".
std::string gain_text(double ratio);

}  // namespace pickle::bench
