#include "interference_traffic.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

std::unique_ptr<Traffic> make_traffic(std::string_view background, std::string_view backend, TrafficRanks ranks) {
  if (background != "p2p" && background != "allgather") {
    throw InvalidArgument(cat("bench interference: unknown background '", background, "'"));
  }
  if (backend == "pickle") return make_pickle_traffic(background, ranks);
  if (backend == "nccl") return make_nccl_traffic(background, ranks);
  if (backend == "ce") return make_ce_traffic(background, ranks);
  throw InvalidArgument(cat("bench interference: unknown backend '", backend, "'"));
}

}  // namespace pickle::bench
