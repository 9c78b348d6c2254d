#include "backend.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

std::unique_ptr<P2pBackend> make_backend(std::string_view name) {
  if (name == "ce") return make_ce_backend();
  if (name == "nccl") return make_nccl_backend();
  if (name == "pickle") return make_pickle_backend();
  throw InvalidArgument(cat("bench: unknown backend '", name, "'"));
}

}  // namespace pickle::bench
