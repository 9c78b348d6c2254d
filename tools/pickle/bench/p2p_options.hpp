#pragma once
// The command line of `pickle bench p2p`: what to run, parsed and checked before any rank starts.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sweep_options.hpp"

namespace pickle::bench {

/// What a p2p measurement does: rank 0 -> rank 1 bandwidth, both directions at once, or one-way latency.
enum class Mode { Uni, Bi, Lat };

/// "uni", "bi", "lat".
std::string_view mode_name(Mode mode) noexcept;

/// Options of `pickle bench p2p`. Defaults are the nccl-tests ones where a flag of the same name exists.
/// -e 0: 1 GiB on GPUs, kHostDefaultMaxBytes on host memory; -n: timed iterations per repeat; -w: untimed
/// iterations before each size.
struct P2pOptions : SweepOptions {
  P2pOptions() : SweepOptions{.factor = 2, .iterations = 20, .warmup = 5} {}

  int repeats = 5;                    ///< --repeats: timed repeats per size (median, min, max over them)
  bool check = true;                  ///< -c: count wrong bytes after each size
  int ranks = 0;                      ///< --ranks: local ranks to launch when started alone; 0: default
  std::vector<std::string> backends;  ///< --backend, in the order given
  std::vector<Mode> modes;            ///< --mode, in the order given
  std::string lanes;                  ///< --lanes, as given: seed 001's lane comparison (`bench transports --lanes`)
  std::string iface;                  ///< --iface, with --lanes only
};

/// Host memory has no copy engine: memcpy runs at a few GB/s, so its default sweep stops earlier.
inline constexpr std::size_t kHostDefaultMaxBytes = std::size_t{16} << 20;
inline constexpr std::size_t kCudaDefaultMaxBytes = std::size_t{1} << 30;

/// The backends `--backend` accepts, in their default order.
inline constexpr std::string_view kBackendNames[] = {"pickle", "nccl", "ce"};

/// Parses the arguments after `p2p`. Unknown flags, bad values and inconsistent ranges are InvalidArgument
/// (the caller turns them into exit code 2).
P2pOptions parse_p2p_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench p2p --help`).
extern const char* const kP2pUsage;

}  // namespace pickle::bench
