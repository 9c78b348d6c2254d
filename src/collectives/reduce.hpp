#pragma once
// The reduction of reduce_scatter and allreduce: out[i] = op(in[0][i], in[1][i], ..., in[k-1][i]), inputs combined in
// the order given (the collectives pass them in rank order, so that every rank's result is the same bits).
//
// The element semantics live here, in functions that both compilers see (reduce_host.cpp with g++, reduce_cuda.cu
// with nvcc), so that the host and CUDA reductions cannot drift apart:
// - half and bfloat16 are widened to float, combined in float, and rounded once to nearest even at the end;
//   float combines in float, double in double, integers in their own type;
// - integer sum and prod wrap around (two's complement), as NCCL's do: computed in the unsigned type;
// - min/max keep the first operand unless the second is strictly smaller/larger (NaN inputs after the first are
//   ignored, a NaN first input stays);
// - avg is the sum divided by the number of ranks at the end (integers: the wrapped sum, C++ division, which
//   truncates toward zero).
// This header is C++17 (nvcc compiles it too) and names no CUDA type outside __CUDACC__.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <pickle/collectives.hpp>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define PICKLE_HD __host__ __device__ __forceinline__
#else
#define PICKLE_HD inline
#endif

namespace pickle::coll {

/// Most inputs one CUDA reduction takes (kernel parameter space); more ranks than this on CUDA is UnavailableError.
inline constexpr int kMaxReduceInputs = 128;

// --- software half / bfloat16 conversions (host side; the device uses CUDA's intrinsics, which round the same way)

/// IEEE binary16 bits -> float (exact).
inline float half_bits_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      std::uint32_t e = 113;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --e;
      }
      bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, NaN (payload kept)
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float -> IEEE binary16 bits, rounded to nearest even (overflow to inf, subnormals kept), as __float2half_rn.
inline std::uint16_t float_to_half_bits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exp = (x >> 23) & 0xffu;
  std::uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u | (mant >> 13) : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    // Subnormal half (or zero): value = m * 2^-24 with m = mant24 >> (14 - e), rounded.
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;  // 14..24
    std::uint32_t m = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u) != 0)) ++m;  // may carry into the smallest normal: still right
    return static_cast<std::uint16_t>(sign | m);
  }
  std::uint32_t m = mant >> 13;
  const std::uint32_t rem = mant & 0x1fffu;
  std::uint32_t h = (static_cast<std::uint32_t>(e) << 10) + m;
  if (rem > 0x1000u || (rem == 0x1000u && (m & 1u) != 0)) ++h;  // a carry into the exponent (even to inf) is right
  return static_cast<std::uint16_t>(sign | h);
}

/// bfloat16 bits -> float (exact).
inline float bf16_bits_to_float(std::uint16_t b) {
  std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float -> bfloat16 bits, rounded to nearest even; NaN stays a (quiet) NaN, as __float2bfloat16_rn.
inline std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

// --- element traits: Storage (what memory holds) and Acc (what the reduction computes in)

struct F16Tag {};
struct BF16Tag {};

template <class T>
struct Element {  // float, double, integers: stored and combined as themselves
  using Storage = T;
  using Acc = T;
  static PICKLE_HD Acc load(Storage s) { return s; }
  static PICKLE_HD Storage store(Acc a) { return a; }
};

template <>
struct Element<F16Tag> {
  using Storage = std::uint16_t;
  using Acc = float;
#ifdef __CUDA_ARCH__
  static __device__ __forceinline__ Acc load(Storage s) { return __half2float(__ushort_as_half(s)); }
  static __device__ __forceinline__ Storage store(Acc a) { return __half_as_ushort(__float2half_rn(a)); }
#else
  static inline Acc load(Storage s) { return half_bits_to_float(s); }
  static inline Storage store(Acc a) { return float_to_half_bits(a); }
#endif
};

template <>
struct Element<BF16Tag> {
  using Storage = std::uint16_t;
  using Acc = float;
#ifdef __CUDA_ARCH__
  static __device__ __forceinline__ Acc load(Storage s) { return __bfloat162float(__ushort_as_bfloat16(s)); }
  static __device__ __forceinline__ Storage store(Acc a) { return __bfloat16_as_ushort(__float2bfloat16_rn(a)); }
#else
  static inline Acc load(Storage s) { return bf16_bits_to_float(s); }
  static inline Storage store(Acc a) { return float_to_bf16_bits(a); }
#endif
};

/// a op b in the accumulation type (avg combines as sum; finish() divides).
template <ReduceOp Op, class A>
PICKLE_HD A combine(A a, A b) {
  if constexpr (std::is_integral_v<A> && (Op == ReduceOp::Sum || Op == ReduceOp::Avg || Op == ReduceOp::Prod)) {
    using U = std::make_unsigned_t<A>;
    if constexpr (Op == ReduceOp::Prod) {
      return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  } else if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Avg) {
    return a + b;
  } else if constexpr (Op == ReduceOp::Prod) {
    return a * b;
  } else if constexpr (Op == ReduceOp::Min) {
    return b < a ? b : a;
  } else {
    return a < b ? b : a;
  }
}

/// The last step: avg divides by the number of ranks; the other operators are done.
template <ReduceOp Op, class A>
PICKLE_HD A finish(A a, int nranks) {
  if constexpr (Op == ReduceOp::Avg && std::is_integral_v<A> && sizeof(A) < sizeof(int)) {
    return static_cast<A>(static_cast<int>(a) / nranks);  // uint8: the divisor may not fit the type
  } else if constexpr (Op == ReduceOp::Avg) {
    return static_cast<A>(a / static_cast<A>(nranks));
  } else {
    (void)nranks;
    return a;
  }
}

/// Calls fn(Element<...>{}) for `type`: one switch that both implementations share.
template <class Fn>
inline void dispatch_type(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::F32: fn(Element<float>{}); break;
    case DataType::F16: fn(Element<F16Tag>{}); break;
    case DataType::BF16: fn(Element<BF16Tag>{}); break;
    case DataType::F64: fn(Element<double>{}); break;
    case DataType::I32: fn(Element<std::int32_t>{}); break;
    case DataType::I64: fn(Element<std::int64_t>{}); break;
    case DataType::U8: fn(Element<std::uint8_t>{}); break;
  }
}

/// Calls fn(std::integral_constant<ReduceOp, op>{}) for `op`: the one switch from the runtime operator to the
/// template argument of the reductions.
template <class Fn>
inline void dispatch_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::Sum: fn(std::integral_constant<ReduceOp, ReduceOp::Sum>{}); break;
    case ReduceOp::Prod: fn(std::integral_constant<ReduceOp, ReduceOp::Prod>{}); break;
    case ReduceOp::Min: fn(std::integral_constant<ReduceOp, ReduceOp::Min>{}); break;
    case ReduceOp::Max: fn(std::integral_constant<ReduceOp, ReduceOp::Max>{}); break;
    case ReduceOp::Avg: fn(std::integral_constant<ReduceOp, ReduceOp::Avg>{}); break;
  }
}

/// Every datatype and operator the two dispatchers above know (to instantiate, or load, every reduction).
inline constexpr DataType kReduceTypes[] = {DataType::F32, DataType::F16, DataType::BF16, DataType::F64,
                                            DataType::I32, DataType::I64, DataType::U8};
inline constexpr ReduceOp kReduceOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg};

/// One reduction: `count` elements of `type` from `ninputs` inputs into `out` (which may be one of the inputs,
/// element for element: in-place).
struct ReduceTask {
  DataType type = DataType::F32;
  ReduceOp op = ReduceOp::Sum;
  int nranks = 1;  ///< avg's divisor
  void* out = nullptr;
  const void* inputs[kMaxReduceInputs] = {};
  int ninputs = 0;
  std::size_t count = 0;
};

/// Most peers a gated reduction (ReduceGate) waits for and tells; with more, the caller uses stream operations.
inline constexpr int kMaxGatePeers = 16;
/// Most CTAs a gated reduction runs on, whatever PICKLE_REDUCE_CTAS allows (it holds them while it waits for the
/// peers): a quarter of an H100's or H200's SMs. The default is PICKLE_REDUCE_CTAS's 8; more make the mailboxes'
/// larger calls faster (on two H200s the pushed steps of a 4 MB call took 25 us on 16 CTAs against 33 on 8,
/// tools/probes/mailbox_push_probe, docs/results/2026-11-30g-h200x2.md).
inline constexpr int kMaxGatedCtas = 32;

/// Waits and raises that a CUDA reduction does itself, for the allreduce mailboxes (mailbox.cpp): before reading its
/// inputs it waits until each wait's word reaches its value, and once every CTA has read them its last CTA writes
/// each raise's value. A stream wait before the kernel and a stream write after it cost a mailbox call more than the
/// kernel itself (the GPU's front end switches between its stream operations and the kernel; on two H200s the probe's
/// call went from 25 to 21 us with the wait in the kernel, tools/probes/mailbox_chain_probe,
/// docs/results/2026-11-28j-h200.md).
///
/// Each wait has two words: one in GPU memory (the waiter's mailbox window, where the kernel polls without crossing
/// PCIe) and the host word of the communicator's signal area that the host reads (the progress thread's watch) and
/// that a failed pair releases (Communicator::Impl::fail_peer_locked writes a value 2^30 ahead into it). A wait
/// passes when either word reaches its value, compared cyclically as cuStreamWaitValue32's GEQ does; the host word is
/// read every 64th poll. A raise writes one word (any address the device can write: the peer's host word).
struct GateWaits {
  int count = 0;
  const std::uint32_t* device[kMaxGatePeers] = {};
  const std::uint32_t* host[kMaxGatePeers] = {};
  std::uint32_t value[kMaxGatePeers] = {};

  /// One more wait (the caller keeps to kMaxGatePeers; launch_reduce_cuda refuses more).
  void add(const std::uint32_t* device_word, const std::uint32_t* host_word, std::uint32_t expected) {
    if (count < kMaxGatePeers) {
      device[count] = device_word;
      host[count] = host_word;
      value[count] = expected;
    }
    ++count;
  }
};

struct ReduceGate {
  /// Waits before the publication (below), as `waits` are before the inputs are read: the mailboxes' loads form
  /// waits here until the peers have read what this rank published in the cell kMailboxDepth calls ago.
  GateWaits pre_waits;
  GateWaits waits;
  int raises = 0;
  std::uint32_t* raise_word[2 * kMaxGatePeers] = {};  ///< a peer's GPU word and its host word, say
  std::uint32_t raise_value[2 * kMaxGatePeers] = {};
  /// CTAs that have read their inputs (GPU memory, 0 between gated launches; the last CTA resets it). Gated launches
  /// that share it must not overlap (the mailbox's calls are ordered).
  std::uint32_t* ctas_done = nullptr;

  /// Publication, before the waits (the mailboxes' loads form, where no copy engine moves the input): every CTA
  /// copies its share of publish_bytes from publish_from to each of the `publishes` destinations (this rank's own
  /// cell, which the peers read over NVLink; or, pushed, each peer's cell, which it reads in its own memory), and
  /// once all have, with a system-wide fence, the last writes announce_value into each announce word (the peers'
  /// filled words, in their GPU memory and their host signal areas).
  const void* publish_from = nullptr;
  int publishes = 0;
  void* publish_to[kMaxGatePeers] = {};
  std::size_t publish_bytes = 0;
  int announces = 0;
  std::uint32_t* announce_word[2 * kMaxGatePeers] = {};
  std::uint32_t announce_value = 0;
  /// CTAs that have published (as ctas_done; another word): the loads form's, and the LL form's CTAs that have
  /// pushed their lines. Needed when announces > 0 (by the LL form only on more than one CTA).
  std::uint32_t* ctas_published = nullptr;
};

/// Runs `task` on the calling thread (host memory); `inputs` may hold more than kMaxReduceInputs pointers.
void reduce_host(DataType type, ReduceOp op, int nranks, void* out, const void* const* inputs, int ninputs,
                 std::size_t count);

/// Enqueues `task` on the CUDA stream `cuda_stream` of `device`, on at most `max_ctas` CTAs (CudaError on a launch
/// failure), gated by `gate` when given (then also with count 0). Only in CUDA builds.
void launch_reduce_cuda(const ReduceTask& task, void* cuda_stream, int device, int max_ctas,
                        const ReduceGate* gate = nullptr);
/// Loads every reduction kernel on `device` (CudaError on failure). CUDA loads kernels lazily, at their first launch,
/// and loading one may synchronize the whole context: a collective's first reduction would then wait for streams
/// that may be waiting for peers that wait for this rank. Communicators on CUDA memory call it when they are made.
/// Only in CUDA builds.
void load_reduce_kernels(int device);
/// CTAs of the reduction kernel that `device` holds at once (the fewest any instance fits on an SM at 1024 threads,
/// times the SMs; 0 if CUDA cannot say). A gated launch takes no more: its first CTAs wait for the peers, whose
/// kernels wait for this one's last CTAs, so every CTA must run at once. Only in CUDA builds.
int resident_reduce_ctas(int device);

}  // namespace pickle::coll
