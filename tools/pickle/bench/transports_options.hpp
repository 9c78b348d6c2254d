#pragma once
// The command line of `pickle bench transports`: which operations, how many runs, and the sweep each child suite
// gets. Parsed and checked before any child starts, so that a bad flag launches nothing.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sweep_options.hpp"

namespace pickle::bench {

/// What a comparison measures: point-to-point (`pickle bench p2p`, unidirectional) or allreduce (`pickle bench coll`).
enum class TransportOp { P2p, Allreduce };

/// "p2p", "allreduce".
std::string_view op_name(TransportOp op) noexcept;

/// Options of `pickle bench transports`. The sweep flags are handed to every child as given; -b and -f always, the
/// others only when set (so that each child keeps its own defaults for the memory kind it finds).
struct TransportsOptions : SweepOptions {
  TransportsOptions() : SweepOptions{.min_bytes = std::size_t{64} << 20, .factor = 2} {}

  int runs = 3;                  ///< --runs: process sets per configuration (the seed ran each test three times)
  std::vector<TransportOp> ops;  ///< --ops, in the order given
  int ranks = 0;                 ///< --ranks: forwarded to every child; 0: the child's default
  int repeats = 0;               ///< --repeats: forwarded to every child; 0: their default
  bool iterations_given = false;  ///< -n was on the command line (forward it)
  bool warmup_given = false;      ///< -w was on the command line (forward it)
  std::vector<int> lanes;         ///< --lanes: seed 001's network comparison at these lane counts (empty: seed 000)
  std::string iface = "lo";       ///< --iface: the interface both libraries' network paths use
};

/// Parses the arguments after `transports`. Unknown flags, bad values and inconsistent ranges are InvalidArgument
/// (the caller turns them into exit code 2).
TransportsOptions parse_transports_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench transports --help`).
extern const char* const kTransportsUsage;

}  // namespace pickle::bench
