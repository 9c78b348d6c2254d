#include "transport/net/net_options.hpp"

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"

namespace pickle::transport::net {

void validate(const NetOptions& options) {
  if (options.provider.empty()) throw InvalidArgument("net transport: the provider name is empty (PICKLE_NET_PROVIDER)");
  if (options.lanes < 1 || options.lanes > NetOptions::kMaxLanes) {
    throw InvalidArgument(cat("net transport: lanes=", options.lanes, " (PICKLE_NET_LANES) must be 1 to ",
                              NetOptions::kMaxLanes));
  }
  if (options.chunk < NetOptions::kMinChunk || options.chunk > NetOptions::kMaxChunk) {
    throw InvalidArgument(cat("net transport: chunk=", options.chunk, " bytes (PICKLE_NET_CHUNK) must be ",
                              NetOptions::kMinChunk, " to ", NetOptions::kMaxChunk));
  }
  if (options.inflight_per_lane < 1 || options.inflight_per_lane > NetOptions::kMaxInflight) {
    throw InvalidArgument(cat("net transport: inflight_per_lane=", options.inflight_per_lane, " must be 1 to ",
                              NetOptions::kMaxInflight));
  }
}

NetOptions options_from_env() {
  NetOptions options;
  options.provider = env::get("PICKLE_NET_PROVIDER");
  options.iface = env::get("PICKLE_NET_IFACE");
  const long long lanes = env::get_int("PICKLE_NET_LANES");
  const long long chunk = env::get_int("PICKLE_NET_CHUNK");
  // Range-check before narrowing, so that 2^32 + 1 lanes is not read as one lane.
  if (lanes < 1 || lanes > NetOptions::kMaxLanes) {
    throw InvalidArgument(cat("PICKLE_NET_LANES=", lanes, " must be 1 to ", NetOptions::kMaxLanes));
  }
  if (chunk < static_cast<long long>(NetOptions::kMinChunk) || chunk > static_cast<long long>(NetOptions::kMaxChunk)) {
    throw InvalidArgument(cat("PICKLE_NET_CHUNK=", chunk, " must be ", NetOptions::kMinChunk, " to ",
                              NetOptions::kMaxChunk, " bytes"));
  }
  options.lanes = static_cast<int>(lanes);
  options.chunk = static_cast<std::size_t>(chunk);
  validate(options);
  return options;
}

}  // namespace pickle::transport::net
