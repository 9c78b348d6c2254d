#include "interference_lanes_args.hpp"

#include <algorithm>
#include <string_view>

namespace pickle::bench {
namespace {

/// The flags the orchestrator sets itself in every child (with their values).
constexpr std::string_view kReplaced[] = {"--lanes", "--iface", "--json", "--backend", "--background"};

bool is_switch(const std::string& flag) {
  return std::find(std::begin(kInterferenceSwitches), std::end(kInterferenceSwitches), flag) !=
         std::end(kInterferenceSwitches);
}

bool is_replaced(const std::string& flag) {
  return std::find(std::begin(kReplaced), std::end(kReplaced), flag) != std::end(kReplaced);
}

}  // namespace

std::vector<LanesChild> plan_lanes_children(const InterferenceOptions& options) {
  std::vector<LanesChild> children;
  for (int lanes : options.lanes) {
    for (const auto& backend : options.backends) {
      children.push_back({lanes, backend, network_configuration(backend, lanes, options.iface)});
    }
  }
  return children;
}

std::vector<std::string> lanes_child_arguments(const std::vector<std::string>& args, const std::string& backend,
                                               const std::string& json_path) {
  std::vector<std::string> child = {"bench", "interference"};
  // The arguments were parsed before (parse_interference_options): every flag but a switch is followed by its value,
  // so walking flag by flag keeps a value that looks like a flag with its flag.
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    const bool has_value = !is_switch(flag) && i + 1 < args.size();
    if (is_replaced(flag)) {
      i += has_value ? 1 : 0;
      continue;
    }
    child.push_back(flag);
    if (has_value) child.push_back(args[++i]);
  }
  child.insert(child.end(), {"--backend", backend, "--background", "p2p", "--json", json_path});
  return child;
}

}  // namespace pickle::bench
