#pragma once
// The command line of `pickle bench coll`: which collectives, datatypes, operators and sizes, parsed and checked
// before any rank starts. Flags are nccl-tests' (-b -e -f -n -w -c -d -o -r) plus pickle's (--backend, --ranks,
// --repeats, --memory, --json).

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pickle/collectives.hpp>

#include "sweep_options.hpp"

namespace pickle::bench {

/// The collectives `pickle bench coll` measures, in their default order.
enum class Collective { AllReduce, AllGather, Broadcast, AllToAll, ReduceScatter };
inline constexpr Collective kAllCollectives[] = {Collective::AllReduce, Collective::AllGather, Collective::Broadcast,
                                                 Collective::AllToAll, Collective::ReduceScatter};

/// "allreduce", "allgather", "broadcast", "alltoall", "reduce_scatter".
std::string_view collective_name(Collective coll) noexcept;
/// Whether the collective combines values (and so takes a reduction operator).
bool is_reduction(Collective coll) noexcept;
/// Whether the collective has a root (broadcast).
bool has_root(Collective coll) noexcept;
/// nccl-tests' bus bandwidth factor for `nranks` ranks: allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall
/// (n-1)/n; broadcast 1. busbw = algbw x factor is the bandwidth each rank's links carry, comparable across n.
double busbw_factor(Collective coll, int nranks) noexcept;

/// One size of one collective in elements, the way nccl-tests counts: `bytes` is the larger of the two buffers
/// (allgather, alltoall: the whole receive buffer; reduce_scatter: the send buffer), rounded down to whole elements
/// (and, for the per-rank counts, to a multiple of the rank count).
struct CollShape {
  std::size_t count = 0;  ///< the count argument of the call (NCCL's: per rank for allgather/alltoall/reduce_scatter)
  std::size_t send_elems = 0;  ///< elements each rank's send buffer holds
  std::size_t recv_elems = 0;  ///< elements each rank's receive buffer holds
  std::size_t bytes = 0;       ///< the size the table reports: max(send, recv) x element size
  /// Elements in the `count` column (nccl-tests prints bytes / element size).
  std::size_t elements(std::size_t element_size) const { return bytes / element_size; }
};
/// The shape of `coll` for a requested size; count 0 when the size holds less than one element per rank.
CollShape coll_shape(Collective coll, std::size_t bytes, std::size_t element_size, int nranks) noexcept;

/// Options of `pickle bench coll`. Defaults are nccl-tests' where a flag of the same name exists, except the sweep
/// (4K .. 1G on GPUs like `pickle bench p2p`, instead of nccl-tests' single 32M).
struct CollOptions : SweepOptions {
  CollOptions() : SweepOptions{.factor = 2, .iterations = 20, .warmup = 5} {}

  std::vector<Collective> collectives;  ///< -c NAME[,NAME]|all (default allreduce)
  std::vector<DataType> dtypes;         ///< -d TYPE[,TYPE]|all (default float)
  std::vector<ReduceOp> ops;            ///< -o OP[,OP]|all (default sum); reductions only
  int root = 0;                         ///< -r: broadcast's root (checked against the world size by the ranks)
  bool check = true;                    ///< -c 0|1 or --check 0|1
  int repeats = 5;                      ///< --repeats: timed repeats per size (median, min, max over them)
  int ranks = 0;                        ///< --ranks: local ranks to launch when started alone; 0: default
  std::vector<std::string> backends;    ///< --backend, in the order given
};

/// Host memory has no copy engine: the default sweep stops earlier there.
inline constexpr std::size_t kCollHostDefaultMaxBytes = std::size_t{16} << 20;
inline constexpr std::size_t kCollCudaDefaultMaxBytes = std::size_t{1} << 30;

/// The backends `pickle bench coll --backend` accepts, in their default order.
inline constexpr std::string_view kCollBackendNames[] = {"pickle", "nccl", "nccl-zero"};
/// The backends `pickle bench scenario` accepts: nccl-zero needs buffers of NCCL's own, which the scenarios do not
/// take from their backend.
inline constexpr std::string_view kScenarioBackendNames[] = {"pickle", "nccl"};
/// switchml's: pickle's software switch beside the allreduces it is compared with.
inline constexpr std::string_view kSwitchMlBackendNames[] = {"switch", "pickle", "nccl"};

/// Parses a comma list of collective names or "all" (InvalidArgument naming `flag` for an unknown name).
std::vector<Collective> parse_collectives(const std::string& text, const std::string& flag);
/// Parses a backend list against `allowed` (kCollBackendNames or kScenarioBackendNames).
std::vector<std::string> parse_coll_backends(const std::string& text, const std::string& flag,
                                             std::span<const std::string_view> allowed);

/// Parses the arguments after `coll`. Unknown flags, bad values and inconsistent ranges are InvalidArgument (the
/// caller turns them into exit code 2).
CollOptions parse_coll_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench coll --help`).
extern const char* const kCollUsage;

}  // namespace pickle::bench
