#pragma once
// The four configurations of seed 000's comparison (two libraries, each with its fast path and its host-staged
// path), the three gains the table shows, and the command line that measures one configuration once. With --lanes,
// seed 001's network comparison instead: NCCL forced onto its Socket transport and pickle's net transport, one pair
// of configurations per lane (socket) count.

#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "transports_options.hpp"

namespace pickle::bench {

/// One way of running a library: which `--backend` of the child suite, with which environment.
struct Configuration {
  std::string key;      ///< short name for the per-size table and the JSON: "nccl-p2p", "pickle-shm", ...
  std::string name;     ///< the table's label: "NCCL (NCCL_P2P_DISABLE=1: SHM)"
  std::string backend;  ///< the child suite's --backend: "nccl" or "pickle"
  /// Variables set in the child's environment (on top of the common ones, kCommonEnv).
  std::vector<std::pair<std::string, std::string>> set;
  /// Variables removed from the child's environment, so that the user's shell cannot turn one configuration into
  /// another (an exported NCCL_P2P_DISABLE=1 would make the "default" row measure SHM).
  std::vector<std::string> unset;
};

/// In every child: NVLink multicast (NVLS) stays off, as in every other suite.
inline constexpr std::pair<std::string_view, std::string_view> kCommonEnv[] = {{"NCCL_NVLS_ENABLE", "0"}};

/// Picks this run's configurations and comparisons: seed 000's four without `options.lanes`, else the network pairs
/// (over `options.iface`). Call once, before configurations() and comparisons().
void choose_configurations(const TransportsOptions& options);

/// The configurations, in the table's order (stable: ConfigRuns point into it).
const std::deque<Configuration>& configurations();

/// A gain the table shows: `fast`'s bandwidth over `slow`'s, on `fast`'s row.
struct Comparison {
  std::string fast, slow;  ///< configuration keys
  std::string label;       ///< "NCCL P2P over NCCL SHM"
};

/// Seed 000: each library's fast path over its slow path, and pickle's slow path over NCCL's (the figure:
/// pickle shm >= 1.2 x NCCL SHM at 64 MiB and above). --lanes: pickle net over NCCL Socket at each lane count.
const std::vector<Comparison>& comparisons();

/// Seed 001's network configuration of `backend` ("nccl" or "pickle") at `lanes` over `iface`: NCCL forced onto its
/// Socket transport with `lanes` socket threads of one socket each and one channel per network peer (`lanes`
/// connections in all for send/recv; NCCL_NCHANNELS_PER_NET_PEER does not reach its collectives, whose ring
/// channels stay NCCL's), or pickle's net transport with `lanes` lanes.
/// `bench transports --lanes` and `bench interference --lanes` both run their children with it. InvalidArgument for
/// another backend.
Configuration network_configuration(std::string_view backend, int lanes, const std::string& iface);

/// --lanes LIST (both suites): lane counts from 1 to 16. PICKLE_NET_LANES allows 64, NCCL_SOCKET_NTHREADS 16: the
/// comparison stops where NCCL's range does. InvalidArgument naming --lanes otherwise.
std::vector<int> parse_lane_counts(const std::string& list);

/// What a child's result file (`root`) fails to record in its "environment" of kCommonEnv and `set`, one phrase per
/// variable: proof that the configuration's variables reached the child, or the row would not measure what its
/// name says.
std::vector<std::string> unrecorded_environment(const json::Value& root,
                                                const std::vector<std::pair<std::string, std::string>>& set);

/// The configuration of that key; nullptr when there is none.
const Configuration* find_configuration(std::string_view key);

/// argv of one measurement (after the program): `bench p2p --backend B --mode uni ...` or
/// `bench coll -c allreduce --backend B ...`, the result written to `json_path`.
std::vector<std::string> child_arguments(const TransportsOptions& options, TransportOp op, const Configuration& config,
                                         const std::string& json_path);

/// The child's environment: `base` (KEY=VALUE entries) without the configuration's unset names, with kCommonEnv and
/// the configuration's variables set.
std::vector<std::string> child_environment(const std::vector<std::string>& base, const Configuration& config);

/// The suite a child of `op` runs: "p2p" or "coll".
std::string_view child_suite(TransportOp op) noexcept;

}  // namespace pickle::bench
