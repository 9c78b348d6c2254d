#include "coll_backend.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

InPlaceLayout CollBackend::in_place_layout(Collective coll, int rank, std::size_t count) const {
  const std::size_t block = static_cast<std::size_t>(rank) * count;
  switch (coll) {
    case Collective::AllGather:
      return {.send_offset = block, .recv_offset = 0};
    case Collective::ReduceScatter:
      return {.send_offset = 0, .recv_offset = block};
    default:
      return {};
  }
}

std::unique_ptr<CollBackend> make_coll_backend(std::string_view name, const std::string& key) {
  if (name == "pickle") return make_pickle_coll_backend(key);
  if (name == "nccl") return make_nccl_coll_backend(key);
  if (name == "nccl-zero") return make_nccl_coll_backend(key, /*zero_cta=*/true);
  if (name == "switch") return make_switch_coll_backend(key);
  throw InvalidArgument(cat("unknown collective backend '", name, "'"));
}

}  // namespace pickle::bench
