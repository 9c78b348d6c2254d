#pragma once
// The data of `pickle bench coll`'s checked iterations: every rank's send buffer holds small integers that depend on
// (rank, index, salt), exactly representable in every datatype (uint8 and bfloat16 included), and so are their sums,
// products, minima and maxima over up to 31 ranks. The expected result of each collective is computed here on the
// host from the same function, so the check is exact (integer division for avg of integer types); only avg of
// floating-point types is compared with a tolerance, since 1/n is not exact and NCCL pre-multiplies by it.
//
// Values: 1..8 (splitmix64 of the index, rank and salt), 1..2 for prod so that products stay powers of two. A block
// that lands at the wrong place, comes from the wrong rank or an earlier step differs in most elements; the receive
// buffer starts poisoned with 0xA5 bytes, which no result can equal.

#include <cstddef>
#include <cstdint>

#include <pickle/collectives.hpp>

#include "coll_options.hpp"

namespace pickle::bench {

/// Everything the values of one checked call depend on.
struct CollPattern {
  Collective coll = Collective::AllReduce;
  DataType type = DataType::F32;
  ReduceOp op = ReduceOp::Sum;  ///< used by reductions only
  int root = 0;                 ///< broadcast only
  int nranks = 1;
  CollShape shape;
  std::uint64_t salt = 0;  ///< differs per step, so that results of an earlier step never pass
  /// Test hook PICKLE_BENCH_CORRUPT: one rank's input element (corrupt_rank(), corrupt_index()) is replaced by a
  /// value that changes every result it contributes to (0 for prod and min, 100 otherwise).
  bool corrupt = false;

  /// The rank whose input is corrupted: the root for broadcast (the only input that reaches anyone), else rank 0.
  int corrupt_rank() const noexcept { return has_root(coll) ? root : 0; }
  std::size_t corrupt_index() const noexcept { return shape.send_elems / 2; }
};

/// The byte every receive buffer is filled with before a checked call.
inline constexpr std::uint8_t kCollPoisonByte = 0xA5;

/// Writes elements [first, first + n) of `rank`'s send buffer, in the pattern's datatype, to `out`.
void fill_inputs(const CollPattern& pattern, int rank, std::uint64_t first, std::size_t n, void* out);

/// Elements [first, first + n) of `rank`'s result (`data`, a host copy, in the pattern's datatype) that differ from
/// the expected result.
std::uint64_t count_wrong_outputs(const CollPattern& pattern, int rank, std::uint64_t first, std::size_t n,
                                  const void* data);

/// A salt that names one step: different backends, collectives, types, operators, sizes and placements differ.
std::uint64_t step_salt(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) noexcept;

}  // namespace pickle::bench
