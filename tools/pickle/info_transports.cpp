#include "info_transports.hpp"

#include <optional>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "transport/select.hpp"

namespace pickle::cli {

std::vector<PairTransport> pair_transports(const topology::Topology& topo) {
  std::optional<transport::Kind> forced;
  try {
    forced = transport::forced_kind();
  } catch (const Error& e) {
    return {{"all pairs", "error", e.message()}};  // without "pickle InvalidArgument error: "
  }
  auto decide = [&](const std::string& pair, const transport::PairFacts& facts) {
    try {
      transport::Choice choice = transport::choose(facts, forced, pair);
      return PairTransport{pair, transport::kind_name(choice.kind), choice.reason};
    } catch (const Error& e) {
      return PairTransport{pair, "error", e.message()};
    }
  };
  std::vector<PairTransport> pairs;
  if (topo.gpus.empty()) {
    transport::PairFacts facts;
    facts.memory = MemoryKind::Host;
    pairs.push_back(decide("host ranks", facts));
    return pairs;
  }
  for (std::size_t i = 0; i < topo.gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < topo.gpus.size(); ++j) {
      transport::PairFacts facts;
      facts.memory = MemoryKind::Cuda;
      facts.peer_access = topo.links[i][j].p2p && topo.links[j][i].p2p;
      facts.no_peer_access_why = cat("CUDA has no peer access between GPU ", i, " and GPU ", j);
      pairs.push_back(decide(cat("GPU", i, " <-> GPU", j), facts));
    }
  }
  return pairs;
}

json::Value pair_transports_json(const std::vector<PairTransport>& pairs) {
  json::Value list = json::Value::array();
  for (const auto& p : pairs) {
    json::Value entry = json::Value::object();
    entry["pair"] = p.pair;
    entry["transport"] = p.transport;
    entry["reason"] = p.reason;
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace pickle::cli
