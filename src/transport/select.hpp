#pragma once
// Which transport joins a pair of ranks: ipc where the copy engine can write the peer's memory directly (P2P over
// NVLink or PCIe, or host memory mapped between processes), shm (staging through pinned shared host memory) for
// GPUs without peer access on one host, net for ranks on other hosts. PICKLE_TRANSPORT forces one for every pair;
// a forced choice that cannot work is an error, never a silent fallback. `pickle info` and the Communicator ask the
// same function, so what info prints is what a job gets.

#include <optional>
#include <string>
#include <string_view>

#include <pickle/memory.hpp>

namespace pickle::transport {

enum class Kind { Ipc, Shm, Net };

/// "ipc", "shm", "net".
const char* kind_name(Kind kind) noexcept;
/// Parses a name; nullopt when unknown.
std::optional<Kind> parse_kind(std::string_view name) noexcept;

/// What is known about a pair of ranks.
struct PairFacts {
  MemoryKind memory = MemoryKind::Host;
  bool same_host = true;
  /// Both GPUs can write each other's memory (CUDA peer access both ways, or the same GPU). Ignored for host memory,
  /// which processes of one host always map.
  bool peer_access = false;
  /// Why there is no peer access (for the reason text), "" when there is.
  std::string no_peer_access_why;
};

struct Choice {
  Kind kind = Kind::Ipc;
  std::string reason;  ///< one phrase: why this transport
};

/// Whether this build has the net transport (libfabric was found).
bool net_built() noexcept;

/// PICKLE_TRANSPORT, parsed; nullopt when unset. An unknown name is InvalidArgument.
std::optional<Kind> forced_kind();

/// The transport for `facts`, or the forced one. A forced transport the pair cannot use, or a pair that only a
/// transport this build lacks could join, is UnavailableError whose message names `pair` (e.g. "rank 0 -> peer 1").
/// `net_available`: whether this build has the net transport.
Choice choose(const PairFacts& facts, std::optional<Kind> forced, const std::string& pair,
              bool net_available = net_built());

}  // namespace pickle::transport
