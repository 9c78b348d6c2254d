#pragma once
// The command line of `pickle bench interference`, parsed and checked before any rank starts (bad flags: exit 2,
// whether or not the machine has GPUs).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "foreground_options.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {

/// Options of `pickle bench interference`. -b/-e/-f are the background's message sizes (default 4 KiB .. 16 GiB by
/// 4, seed 001's "NVLink P2P vs compute" rows); -n/-w are the foreground's timed and warm-up iterations (the seed's
/// 100 and 20).
struct InterferenceOptions : SweepOptions {
  InterferenceOptions() : SweepOptions{.factor = 4, .iterations = 100, .warmup = 20} {}

  std::vector<std::string> foregrounds;  ///< --foreground, in the order given
  AttentionImpl attention = AttentionImpl::Auto;  ///< --attention
  std::vector<std::string> backends;     ///< --backend, in the order given
  std::vector<std::string> backgrounds;  ///< --background, in the order given
  /// --warmup-ms: the warm-up also lasts at least this long. A GPU under full load lowers its clocks after a few
  /// hundred ms (power and temperature limits); 20 GEMM iterations (32 ms) would time a GPU still at its boost clock.
  int warmup_ms = 1000;
  int depth = 8;                         ///< --depth: background messages in flight (the ring)
  bool check = true;                     ///< -c: check the background's data and the foreground's result
  /// --ranks: local ranks to launch when started alone (0: one per GPU), and the ranks of the allgather background
  /// (0: every rank of the job). At most the job's world size.
  int ranks = 0;
  /// --share-gpus: run even where ranks must share a GPU (placed round robin, rank r on GPU r mod GPUs). Such figures
  /// measure nothing about interference (the ranks compete for one GPU's SMs and copy engines): a functional run.
  bool share_gpus = false;
  /// --lanes: seed 001's "RDMA P2P vs compute" by lane count. The command then orchestrates one child process set per
  /// lane count and backend, each forced onto its library's network path (interference_lanes.hpp); empty: a plain run.
  std::vector<int> lanes;
  std::string iface = "lo";  ///< --iface: the interface both libraries' network paths use with --lanes
};

/// -e when not given: seed 001's largest message.
inline constexpr std::size_t kInterferenceDefaultMaxBytes = std::size_t{16} << 30;

/// What each list flag accepts (--foreground's: foreground_options.hpp). `allgather` is accepted but not run by
/// default; so is `ce` (the raw copy engine, p2p only: under allgather it is unavailable).
inline constexpr std::string_view kInterferenceBackendNames[] = {"pickle", "nccl", "ce"};
inline constexpr std::string_view kBackgroundNames[] = {"p2p", "allgather"};
/// --backend when not given. One list serves every background, and ce has no allgather: ask for it by name.
inline constexpr std::string_view kInterferenceDefaultBackends[] = {"pickle", "nccl"};

/// The flags that take no value (every other flag takes exactly one): what lets a child's command line be made from
/// the user's by dropping flags with their values (interference_lanes_args.hpp).
inline constexpr std::string_view kInterferenceSwitches[] = {"--share-gpus", "-h", "--help"};

/// Parses the arguments after `interference`. Unknown flags, bad values and inconsistent ranges are
/// InvalidArgument (exit code 2).
InterferenceOptions parse_interference_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench interference --help`).
extern const char* const kInterferenceUsage;

}  // namespace pickle::bench
