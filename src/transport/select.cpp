#include "transport/select.hpp"

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"

namespace pickle::transport {

const char* kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::Ipc: return "ipc";
    case Kind::Shm: return "shm";
    case Kind::Net: return "net";
  }
  return "?";
}

std::optional<Kind> parse_kind(std::string_view name) noexcept {
  for (Kind kind : {Kind::Ipc, Kind::Shm, Kind::Net}) {
    if (name == kind_name(kind)) return kind;
  }
  return std::nullopt;
}

std::optional<Kind> forced_kind() {
  auto value = env::get_if_set("PICKLE_TRANSPORT");
  if (!value) return std::nullopt;
  auto kind = parse_kind(*value);
  if (!kind) throw InvalidArgument(cat("PICKLE_TRANSPORT=", *value, " is not a transport (ipc, shm or net)"));
  return kind;
}

bool net_built() noexcept {
#ifdef PICKLE_HAVE_LIBFABRIC
  return true;
#else
  return false;
#endif
}

Choice choose(const PairFacts& facts, std::optional<Kind> forced, const std::string& pair, bool net_available) {
  const bool direct = facts.memory == MemoryKind::Host || facts.peer_access;
  if (forced) {
    const std::string head = cat(pair, ": PICKLE_TRANSPORT=", kind_name(*forced), " cannot be used: ");
    switch (*forced) {
      case Kind::Net:
        if (!net_available) throw UnavailableError(head + "this build has no net transport (built without libfabric)");
        return {Kind::Net, "forced by PICKLE_TRANSPORT"};
      case Kind::Ipc:
        if (!facts.same_host) throw UnavailableError(head + "the ranks are on different hosts");
        if (!direct) throw UnavailableError(head + facts.no_peer_access_why);
        return {Kind::Ipc, "forced by PICKLE_TRANSPORT"};
      case Kind::Shm:
        if (!facts.same_host) throw UnavailableError(head + "the ranks are on different hosts");
        return {Kind::Shm, "forced by PICKLE_TRANSPORT"};
    }
  }
  if (!facts.same_host) {
    if (!net_available) {
      throw UnavailableError(cat(pair, ": the ranks are on different hosts, which needs the net transport; this build "
                                       "has none (built without libfabric)"));
    }
    return {Kind::Net, facts.memory == MemoryKind::Cuda ? "different hosts (GPU memory staged through pinned buffers)"
                                                        : "different hosts"};
  }
  if (facts.memory == MemoryKind::Host) return {Kind::Ipc, "host memory, mapped between processes"};
  if (facts.peer_access) return {Kind::Ipc, "CUDA peer access (P2P)"};
  return {Kind::Shm, cat("no peer access: ", facts.no_peer_access_why)};
}

}  // namespace pickle::transport
