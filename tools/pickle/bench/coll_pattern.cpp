#include "coll_pattern.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "coll_float16.hpp"

namespace pickle::bench {
namespace {

std::uint64_t splitmix64(std::uint64_t x) noexcept {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The clean input of `rank` at send index `index`: 1..8, or 1..2 for prod.
std::uint64_t clean_input(const CollPattern& p, int rank, std::uint64_t index) noexcept {
  std::uint64_t h = splitmix64(index ^ (p.salt + static_cast<std::uint64_t>(rank) * 0xD1B54A32D192ED03ull));
  return is_reduction(p.coll) && p.op == ReduceOp::Prod ? 1 + (h >> 63) : 1 + (h >> 61);
}

/// What `rank` actually sends: the clean input, except the one element the test hook corrupts.
std::uint64_t sent_input(const CollPattern& p, int rank, std::uint64_t index) noexcept {
  if (p.corrupt && rank == p.corrupt_rank() && index == p.corrupt_index()) {
    bool low = is_reduction(p.coll) && (p.op == ReduceOp::Prod || p.op == ReduceOp::Min);
    return low ? 0 : 100;
  }
  return clean_input(p, rank, index);
}

// Storage types of the 16-bit floats.
struct Half {
  std::uint16_t bits;
};
struct BFloat {
  std::uint16_t bits;
};

template <class T>
constexpr bool kFloating = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;

template <class T>
T encode(double value) noexcept {
  if constexpr (std::is_same_v<T, Half>)
    return Half{float_to_half(static_cast<float>(value))};
  else if constexpr (std::is_same_v<T, BFloat>)
    return BFloat{float_to_bfloat16(static_cast<float>(value))};
  else
    return static_cast<T>(value);
}

template <class T>
double decode(T value) noexcept {
  if constexpr (std::is_same_v<T, Half>)
    return half_to_float(value.bits);
  else if constexpr (std::is_same_v<T, BFloat>)
    return bfloat16_to_float(value.bits);
  else
    return static_cast<double>(value);
}

/// Unit roundoff x 2 of each floating type: the tolerance unit of avg.
template <class T>
double epsilon() noexcept {
  if constexpr (std::is_same_v<T, Half>)
    return 0x1p-10;
  else if constexpr (std::is_same_v<T, BFloat>)
    return 0x1p-7;
  else if constexpr (std::is_same_v<T, float>)
    return 0x1p-23;
  else
    return 0x1p-52;
}

/// `acc` combined with `v` by `op`, in the accumulator's type (avg sums; the caller divides by the rank count).
template <class A>
A combine(ReduceOp op, A acc, A v) noexcept {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return acc + v;
    case ReduceOp::Prod:
      return acc * v;
    case ReduceOp::Min:
      return std::min(acc, v);
    case ReduceOp::Max:
      return std::max(acc, v);
  }
  return acc;
}

/// Compares one received element with the reduction of `inputs(q)` over the ranks (or with one input, for the
/// collectives that only move data). True when it is right.
template <class T, class Inputs>
bool reduced_matches(const CollPattern& p, T actual, Inputs&& inputs) noexcept {
  const int n = p.nranks;
  if constexpr (kFloating<T>) {
    // Inputs and every partial result are small integers (or powers of two): exact in double and in T.
    double acc = static_cast<double>(inputs(0));
    for (int q = 1; q < n; ++q) {
      double v = static_cast<double>(inputs(q));
      acc = combine(p.op, acc, v);
    }
    const double got = decode(actual);
    if (p.op == ReduceOp::Avg) {
      const double want = acc / n;
      return std::fabs(got - want) <= (n + 1) * epsilon<T>() * std::max(1.0, std::fabs(want));
    }
    return got == decode(encode<T>(acc));
  } else {
    // Integer arithmetic wraps at the type's width, as it does on the GPU.
    std::uint64_t acc = inputs(0);
    for (int q = 1; q < n; ++q) {
      std::uint64_t v = inputs(q);
      acc = combine(p.op, acc, v);
    }
    T want = static_cast<T>(acc);
    if (p.op == ReduceOp::Avg) want = static_cast<T>(want / static_cast<T>(n));
    return actual == want;
  }
}

template <class T>
bool same(T a, T b) noexcept {
  if constexpr (kFloating<T>)
    return decode(a) == decode(b);
  else
    return a == b;
}

template <class T>
void fill_typed(const CollPattern& p, int rank, std::uint64_t first, std::size_t n, void* out) {
  auto* values = static_cast<T*>(out);
  for (std::size_t i = 0; i < n; ++i) values[i] = encode<T>(static_cast<double>(sent_input(p, rank, first + i)));
}

template <class T>
std::uint64_t count_typed(const CollPattern& p, int rank, std::uint64_t first, std::size_t n, const void* data) {
  const auto* values = static_cast<const T*>(data);
  const std::uint64_t c = p.shape.count, r = static_cast<std::uint64_t>(rank);
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t j = first + i;
    bool ok = false;
    switch (p.coll) {
      case Collective::AllReduce:
        ok = reduced_matches<T>(p, values[i], [&](int q) { return clean_input(p, q, j); });
        break;
      case Collective::ReduceScatter:
        ok = reduced_matches<T>(p, values[i], [&](int q) { return clean_input(p, q, r * c + j); });
        break;
      case Collective::Broadcast:
        ok = same(values[i], encode<T>(static_cast<double>(clean_input(p, p.root, j))));
        break;
      case Collective::AllGather:
        ok = same(values[i], encode<T>(static_cast<double>(clean_input(p, static_cast<int>(j / c), j % c))));
        break;
      case Collective::AllToAll:
        ok = same(values[i], encode<T>(static_cast<double>(clean_input(p, static_cast<int>(j / c), r * c + j % c))));
        break;
    }
    if (!ok) ++wrong;
  }
  return wrong;
}

/// Calls fn(T{}) with the storage type of `type`.
template <class Fn>
auto with_storage(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::F32:
      return fn(float{});
    case DataType::F16:
      return fn(Half{});
    case DataType::BF16:
      return fn(BFloat{});
    case DataType::F64:
      return fn(double{});
    case DataType::I32:
      return fn(std::int32_t{});
    case DataType::I64:
      return fn(std::int64_t{});
    case DataType::U8:
      return fn(std::uint8_t{});
  }
  return fn(float{});
}

}  // namespace

void fill_inputs(const CollPattern& pattern, int rank, std::uint64_t first, std::size_t n, void* out) {
  with_storage(pattern.type, [&](auto tag) { fill_typed<decltype(tag)>(pattern, rank, first, n, out); });
}

std::uint64_t count_wrong_outputs(const CollPattern& pattern, int rank, std::uint64_t first, std::size_t n,
                                  const void* data) {
  return with_storage(pattern.type,
                      [&](auto tag) { return count_typed<decltype(tag)>(pattern, rank, first, n, data); });
}

std::uint64_t step_salt(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) noexcept {
  return splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d);
}

}  // namespace pickle::bench
