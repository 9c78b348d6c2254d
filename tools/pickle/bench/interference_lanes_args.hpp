#pragma once
// The children of `pickle bench interference --lanes`: one process set per lane count and backend, each the same
// `pickle bench interference` with the user's flags, for one backend and the p2p background, its library forced onto
// its network path by the environment (seed 001's network configurations, transports_configs.hpp). NCCL reads its
// environment once per process, so each lane count needs a process set of its own.

#include <string>
#include <vector>

#include "interference_options.hpp"
#include "transports_configs.hpp"

namespace pickle::bench {

/// One child: its lane count, backend and the configuration whose environment it runs with.
struct LanesChild {
  int lanes = 0;
  std::string backend;
  Configuration config;
};

/// Every child in the order they run: for each lane count of --lanes, each --backend in its order (so that a drift of
/// the machine over the run spreads over both libraries at every lane count instead of biasing one).
std::vector<LanesChild> plan_lanes_children(const InterferenceOptions& options);

/// argv of a child (after the program): "bench", "interference", the user's `args` without --lanes, --iface, --json,
/// --backend and --background (each with its value), then `--backend <backend> --background p2p --json <json_path>`.
/// Every other flag passes through as typed, so the child measures what the user asked for.
std::vector<std::string> lanes_child_arguments(const std::vector<std::string>& args, const std::string& backend,
                                               const std::string& json_path);

}  // namespace pickle::bench
