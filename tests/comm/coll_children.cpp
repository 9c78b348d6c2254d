// Rank programs of the collectives' tests, shared by the CPU tests (host memory, tests/comm/test_coll_host.cpp) and
// the GPU tests (tests/cuda/test_coll_cuda.cpp): the same children run with "host" or "cuda" as their first argument.
//
// Every rank computes every rank's inputs from (rank, index, salt), so that it can compute the expected result of
// any collective itself. Reductions are checked against a reference computed here, in double (floating point) or
// 64-bit integers with the documented wrap-around, independently of the library's own element code. Inputs are
// exactly representable in their type (small multiples of 1/8, 1/2 or integers), so that sums, mins and maxes are
// exact; prod inputs are +-{1, 2, 0.5, 1.5} (floats) or +-{1, 2, 3} (integers), so that no product of 8 overflows.
// Tolerance (relative to max(|expected|, 1)): double 1e-12, float 1e-6, half 1e-3, bfloat16 8e-3, integers exact:
// the half-precision results are rounded once from float, which is within half an ulp (2^-11, 2^-8).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pickle/collectives.hpp>
#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "comm_children.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "subprocess.hpp"
#include "thread_ranks.hpp"

namespace pickle::test {
namespace {

constexpr DataType kTypes[] = {DataType::F32, DataType::F16, DataType::BF16, DataType::F64,
                               DataType::I32, DataType::I64, DataType::U8};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg};

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t hash(std::uint64_t a, std::uint64_t b, std::uint64_t salt) {
  return mix(a * 0xD1B54A32D192ED03ull ^ mix(b + 0x632BE59BD9B4E019ull * (salt + 1)));
}

bool is_float(DataType type) {
  return type == DataType::F32 || type == DataType::F16 || type == DataType::BF16 || type == DataType::F64;
}

/// What rank `rank` contributes at `index` of a reduction: exactly representable in `type`.
double input_value(DataType type, ReduceOp op, int rank, std::size_t index, std::uint64_t salt) {
  const std::uint64_t h = hash(static_cast<std::uint64_t>(rank), index, salt);
  const bool negative = ((h >> 20) & 1) != 0;
  if (op == ReduceOp::Prod) {
    if (is_float(type)) {
      static constexpr double kFactors[] = {1, 2, 0.5, 1.5};
      const double v = kFactors[h % 4];
      return negative ? -v : v;
    }
    const double v = static_cast<double>(1 + h % 3);
    return type == DataType::U8 || !negative ? v : -v;
  }
  switch (type) {
    case DataType::F32:
    case DataType::F64: return static_cast<double>(static_cast<std::int64_t>(h % 16001) - 8000) / 8;
    case DataType::F16:
    case DataType::BF16: return static_cast<double>(static_cast<std::int64_t>(h % 481) - 240) / 2;
    case DataType::I32:
    case DataType::I64: return static_cast<double>(static_cast<std::int64_t>(h % 2001) - 1000);
    case DataType::U8: return static_cast<double>(h % 256);
  }
  return 0;
}

/// Exact encoding of a value that the type represents (all inputs above are normal numbers or zero).
std::uint16_t exact_half(double v) {
  if (v == 0) return 0;
  std::uint16_t sign = v < 0 ? 0x8000 : 0;
  int exponent = 0;
  const double m = std::frexp(std::fabs(v), &exponent);  // |v| = m * 2^exponent, m in [0.5, 1)
  const auto field = static_cast<std::uint16_t>(exponent - 1 + 15);
  const auto mantissa = static_cast<std::uint16_t>(std::lround((m * 2 - 1) * 1024));
  return static_cast<std::uint16_t>(sign | (field << 10) | mantissa);
}

double decode_half(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) v = std::ldexp(mantissa, -24);
  else if (exponent == 31) v = mantissa != 0 ? NAN : INFINITY;
  else v = std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) != 0 ? -v : v;
}

void encode(DataType type, double v, void* dst) {
  switch (type) {
    case DataType::F32: { float f = static_cast<float>(v); std::memcpy(dst, &f, 4); break; }
    case DataType::F64: std::memcpy(dst, &v, 8); break;
    case DataType::F16: { std::uint16_t h = exact_half(v); std::memcpy(dst, &h, 2); break; }
    case DataType::BF16: {
      float f = static_cast<float>(v);
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      auto b = static_cast<std::uint16_t>(bits >> 16);  // exact: the value has at most 8 significant bits
      std::memcpy(dst, &b, 2);
      break;
    }
    case DataType::I32: { auto i = static_cast<std::int32_t>(v); std::memcpy(dst, &i, 4); break; }
    case DataType::I64: { auto i = static_cast<std::int64_t>(v); std::memcpy(dst, &i, 8); break; }
    case DataType::U8: { auto u = static_cast<std::uint8_t>(v); std::memcpy(dst, &u, 1); break; }
  }
}

double decode(DataType type, const void* src) {
  switch (type) {
    case DataType::F32: { float f; std::memcpy(&f, src, 4); return f; }
    case DataType::F64: { double d; std::memcpy(&d, src, 8); return d; }
    case DataType::F16: { std::uint16_t h; std::memcpy(&h, src, 2); return decode_half(h); }
    case DataType::BF16: {
      std::uint16_t b;
      std::memcpy(&b, src, 2);
      std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DataType::I32: { std::int32_t i; std::memcpy(&i, src, 4); return i; }
    case DataType::I64: { std::int64_t i; std::memcpy(&i, src, 8); return static_cast<double>(i); }
    case DataType::U8: { std::uint8_t u; std::memcpy(&u, src, 1); return u; }
  }
  return 0;
}

/// `acc` combined with `v` by `op`, in the reference's type (avg sums; the caller divides by the world size).
template <class A>
A combine(ReduceOp op, A acc, A v) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return acc + v;
    case ReduceOp::Prod: return acc * v;
    case ReduceOp::Min: return std::min(acc, v);
    case ReduceOp::Max: return std::max(acc, v);
  }
  return acc;
}

/// The reduction of every rank's input at `index` (global index into the inputs), as the library must compute it.
double expected_value(DataType type, ReduceOp op, int world, std::size_t index, std::uint64_t salt) {
  if (is_float(type)) {
    double acc = input_value(type, op, 0, index, salt);
    for (int r = 1; r < world; ++r) {
      const double v = input_value(type, op, r, index, salt);
      acc = combine(op, acc, v);
    }
    return op == ReduceOp::Avg ? acc / world : acc;
  }
  // Integers: exact in 64 bits (inputs are small), then the type's wrap-around; avg divides the wrapped sum.
  auto acc = static_cast<std::int64_t>(input_value(type, op, 0, index, salt));
  for (int r = 1; r < world; ++r) {
    const auto v = static_cast<std::int64_t>(input_value(type, op, r, index, salt));
    acc = combine(op, acc, v);
  }
  if (type == DataType::U8) acc = static_cast<std::uint8_t>(acc);
  if (type == DataType::I32) acc = static_cast<std::int32_t>(acc);
  if (op == ReduceOp::Avg) acc /= world;  // C++ division truncates toward zero, as the library's
  return static_cast<double>(acc);
}

/// `v` rounded to `type`'s precision, to nearest even (the inputs' sums are exact in double, so this is what the
/// library's rounding of its float result gives): 11 significant bits for half, 8 for bfloat16, 24 for float.
double round_to(DataType type, double v) {
  const int bits = type == DataType::F16 ? 11 : type == DataType::BF16 ? 8 : type == DataType::F32 ? 24 : 53;
  if (v == 0 || bits == 53) return v;
  int exponent = 0;
  const double m = std::frexp(v, &exponent);
  return std::ldexp(std::nearbyint(std::ldexp(m, bits)), exponent - bits);
}

/// The reduction at `index` as the two-level allreduce and reduce_scatter compute it (host_of: each rank's host):
/// each host's ranks combined and rounded to the type (the host's partial result is stored in it), then the hosts'
/// partials combined. Integers wrap around alike in any grouping, so only floating point differs from the direct
/// reference. Not for avg (which the library runs directly).
double expected_two_level(DataType type, ReduceOp op, const std::vector<int>& host_of, std::size_t index,
                          std::uint64_t salt) {
  const int world = static_cast<int>(host_of.size());
  if (!is_float(type)) return expected_value(type, op, world, index, salt);
  const int hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  std::optional<double> total;
  for (int host = 0; host < hosts; ++host) {
    std::optional<double> partial;
    for (int r = 0; r < world; ++r) {
      if (host_of[static_cast<std::size_t>(r)] != host) continue;
      const double value = input_value(type, op, r, index, salt);
      partial = partial ? combine(op, *partial, value) : value;
    }
    const double rounded = round_to(type, *partial);
    total = total ? combine(op, *total, rounded) : rounded;
  }
  return *total;
}

/// Each rank's host for ranks on `hosts` hosts: "blocked", hosts of consecutive ranks (rank / per host), or
/// "mirrored", ranks r and world - 1 - r together (4 ranks on 2 hosts: 0 3 | 1 2; a host's rank of index 1 is then
/// not in host order among the ranks of index 1).
std::vector<int> host_layout(int world, int hosts, const std::string& layout) {
  std::vector<int> host_of(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    host_of[static_cast<std::size_t>(r)] = layout == "mirrored" ? std::min(r, world - 1 - r) % hosts
                                                                : r / (world / hosts);
  }
  return host_of;
}

double tolerance(DataType type) {
  switch (type) {
    case DataType::F64: return 1e-12;
    case DataType::F32: return 1e-6;
    case DataType::F16: return 1e-3;
    case DataType::BF16: return 8e-3;
    default: return 0;
  }
}

bool close_enough(DataType type, double got, double want) {
  if (!is_float(type)) return got == want;
  return std::fabs(got - want) <= tolerance(type) * std::max(1.0, std::fabs(want));
}

/// Bytes of the byte-exact collectives' data: a pattern per (owner, block, salt).
std::vector<std::uint8_t> pattern_bytes(std::size_t bytes, std::uint64_t owner, std::uint64_t block,
                                        std::uint64_t salt) {
  std::vector<std::uint8_t> out(bytes);
  const std::uint64_t seed = hash(owner, block, salt);
  for (std::size_t i = 0; i < bytes; i += 8) {
    const std::uint64_t word = mix(seed + i);
    for (std::size_t b = 0; b < 8 && i + b < bytes; ++b) out[i + b] = static_cast<std::uint8_t>(word >> (8 * b));
  }
  return out;
}

/// Runs collectives on one stream and checks results, counting (and describing) failures instead of stopping at
/// the first: a rank that stopped early would leave its peers waiting in their next collective.
class Harness {
 public:
  Harness(Communicator& comm, std::size_t bytes)
      : comm_(comm),
        a_(comm.alloc(bytes)),
        b_(comm.alloc(bytes)),
        bytes_(bytes),
        poison_(bytes, 0xEE),
        stream_(comm.make_stream()) {}
  ~Harness() {
    // Work still queued after a failure reads the buffers: let it finish (the stream is destroyed first, too).
    try {
      stream_.synchronize();
    } catch (const std::exception&) {
      // Reported by whoever failed.
    }
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  Communicator& comm() { return comm_; }
  Stream& stream() { return stream_; }
  int rank() const { return comm_.rank(); }
  int world() const { return comm_.world_size(); }
  char* a(std::size_t offset = 0) { return static_cast<char*>(a_.data()) + offset; }
  char* b(std::size_t offset = 0) { return static_cast<char*>(b_.data()) + offset; }
  std::size_t capacity() const { return bytes_; }
  int failures() const { return failures_; }
  /// Each rank's host when the ranks run on several hosts (the collectives then go in two levels), else empty.
  std::vector<int> host_of;
  /// Ranks per host in two levels, else 0.
  int per_host() const { return host_of.empty() ? 0 : world() / (*std::max_element(host_of.begin(), host_of.end()) + 1); }

  /// Enqueues a copy of `host` (which must outlive the next synchronize) to `dst`, on the collectives' stream: the
  /// collective that follows must wait for it.
  void upload(void* dst, const std::vector<std::uint8_t>& host) { stream_.impl().copy(dst, host.data(), host.size()); }
  /// Enqueues `bytes` of 0xEE at `dst`: results that were never written cannot pass.
  void poison(void* dst, std::size_t bytes) { stream_.impl().copy(dst, poison_.data(), bytes); }
  /// Synchronizes the stream, then copies `bytes` at `src` back. The synchronize comes first: it is bounded by
  /// PICKLE_TIMEOUT, where a copy into pageable memory behind a stream that never gets there would block for good.
  std::vector<std::uint8_t> download(const void* src, std::size_t bytes) {
    stream_.synchronize();
    std::vector<std::uint8_t> host(bytes);
    stream_.impl().copy(host.data(), src, bytes);
    stream_.synchronize();
    return host;
  }

  void fail(const std::string& what) {
    if (++failures_ <= 20) std::fprintf(stderr, "rank %d: %s\n", rank(), what.c_str());
  }
  /// After a failed collective: let queued copies from host vectors finish before those vectors go away.
  void fail(const std::string& name, const Error& error) {
    fail(cat(name, ": ", error.what()));
    try {
      stream_.synchronize();
    } catch (const Error&) {
      // Reported already, in substance.
    }
  }

  /// Reduction results: element i of `got` must be the reduction of every rank's input at first_index + i.
  /// Elements [0, two_level) come from the two-level algorithms (expected_two_level).
  void check_reduced(const std::string& name, DataType type, ReduceOp op, const std::vector<std::uint8_t>& got,
                     std::size_t first_index, std::uint64_t salt, std::size_t two_level = 0) {
    const std::size_t element = datatype_size(type);
    int reported = 0;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i * element < got.size(); ++i) {
      const double value = decode(type, got.data() + i * element);
      const double want = i < two_level ? expected_two_level(type, op, host_of, first_index + i, salt)
                                        : expected_value(type, op, world(), first_index + i, salt);
      if (close_enough(type, value, want)) continue;
      ++wrong;
      if (reported++ < 3) fail(cat(name, ": element ", i, " is ", value, ", expected ", want));
    }
    if (wrong > 3) fail(cat(name, ": ", wrong, " wrong elements in all"));
  }

  void check_bytes(const std::string& name, const std::vector<std::uint8_t>& got, std::size_t offset,
                   const std::vector<std::uint8_t>& want) {
    std::size_t wrong = 0, first = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (got[offset + i] != want[i] && wrong++ == 0) first = i;
    }
    if (wrong > 0) fail(cat(name, ": ", wrong, " wrong bytes of ", want.size(), ", the first at ", first));
  }

 private:
  Communicator& comm_;
  Buffer a_, b_;
  std::size_t bytes_;
  std::vector<std::uint8_t> poison_;
  Stream stream_;  // after what its queued work reads: destroyed before it
  int failures_ = 0;
};

std::vector<std::uint8_t> reduction_input(DataType type, ReduceOp op, int rank, std::size_t first, std::size_t count,
                                          std::uint64_t salt) {
  const std::size_t element = datatype_size(type);
  std::vector<std::uint8_t> host(count * element);
  for (std::size_t i = 0; i < count; ++i) {
    encode(type, input_value(type, op, rank, first + i, salt), &host[i * element]);
  }
  return host;
}

std::string describe_case(const char* op, DataType type, std::size_t count, const std::string& more) {
  return cat(op, " ", datatype_name(type), " count ", count, more.empty() ? "" : " ", more);
}

/// allreduce of `count` elements at element offset `offset` of the buffers, in place or not.
void run_allreduce(Harness& h, DataType type, ReduceOp op, std::size_t count, bool in_place, std::uint64_t salt,
                   std::size_t offset = 0) {
  const std::size_t element = datatype_size(type), bytes = count * element;
  char* send = h.a(offset * element);
  char* recv = in_place ? send : h.b(offset * element);
  auto input = reduction_input(type, op, h.rank(), 0, count, salt);
  h.upload(send, input);
  if (!in_place) h.poison(recv, bytes);
  const std::string name = describe_case("allreduce", type, count, cat(reduce_op_name(op), in_place ? " in-place" : "",
                                                                       offset != 0 ? " unaligned" : ""));
  try {
    h.comm().allreduce(h.stream(), send, recv, count, type, op);
    // In two levels, all but the count % per_host elements left over (which go directly); avg always directly.
    const auto per_host = static_cast<std::size_t>(h.per_host());
    const std::size_t two_level = per_host > 1 && op != ReduceOp::Avg ? count / per_host * per_host : 0;
    h.check_reduced(name, type, op, h.download(recv, bytes), 0, salt, two_level);
    if (!in_place && h.download(send, bytes) != input) h.fail(name + ": the send buffer changed");
  } catch (const Error& e) {
    h.fail(name, e);
  }
}

/// reduce_scatter: mode 0 out of place, 1 in place over this rank's block (recv = send + rank * count), 2 recv == send.
void run_reduce_scatter(Harness& h, DataType type, ReduceOp op, std::size_t count, int mode, std::uint64_t salt) {
  const std::size_t element = datatype_size(type), bytes = count * element;
  const auto world = static_cast<std::size_t>(h.world());
  char* send = h.a();
  char* recv = mode == 0 ? h.b() : mode == 1 ? h.a(static_cast<std::size_t>(h.rank()) * bytes) : h.a();
  auto input = reduction_input(type, op, h.rank(), 0, world * count, salt);
  h.upload(send, input);
  if (mode == 0) h.poison(recv, bytes);
  static const char* kModes[] = {"", "in-place", "recv == send"};
  const std::string name = describe_case("reduce_scatter", type, count, cat(reduce_op_name(op), " ", kModes[mode]));
  try {
    h.comm().reduce_scatter(h.stream(), send, recv, count, type, op);
    // In two levels all of it, but avg (always directly).
    const std::size_t two_level = h.per_host() > 1 && op != ReduceOp::Avg ? count : 0;
    h.check_reduced(name, type, op, h.download(recv, bytes), static_cast<std::size_t>(h.rank()) * count, salt,
                    two_level);
  } catch (const Error& e) {
    h.fail(name, e);
  }
}

void run_allgather(Harness& h, DataType type, std::size_t count, bool in_place, std::uint64_t salt) {
  const std::size_t bytes = count * datatype_size(type);
  const auto rank = static_cast<std::size_t>(h.rank()), world = static_cast<std::size_t>(h.world());
  char* recv = in_place ? h.a() : h.b();
  char* send = in_place ? h.a(rank * bytes) : h.a();
  auto mine = pattern_bytes(bytes, rank, 0, salt);
  h.poison(recv, world * bytes);
  h.upload(send, mine);
  const std::string name = describe_case("allgather", type, count, in_place ? "in-place" : "");
  try {
    h.comm().allgather(h.stream(), send, recv, count, type);
    auto got = h.download(recv, world * bytes);
    for (std::size_t r = 0; r < world; ++r) {
      h.check_bytes(cat(name, " block ", r), got, r * bytes, pattern_bytes(bytes, r, 0, salt));
    }
  } catch (const Error& e) {
    h.fail(name, e);
  }
}

void run_broadcast(Harness& h, DataType type, std::size_t count, bool in_place, int root, std::uint64_t salt) {
  const std::size_t bytes = count * datatype_size(type);
  char* recv = h.b();
  char* send = in_place ? recv : h.a();
  auto data = pattern_bytes(bytes, static_cast<std::uint64_t>(root), 1, salt);
  h.poison(recv, bytes);
  if (h.rank() == root) h.upload(send, data);
  // Non-root ranks may pass anything as send: it is ignored.
  const void* send_arg = h.rank() == root ? send : (in_place ? recv : nullptr);
  const std::string name = describe_case("broadcast", type, count, cat("root ", root, in_place ? " in-place" : ""));
  try {
    h.comm().broadcast(h.stream(), send_arg, recv, count, type, root);
    h.check_bytes(name, h.download(recv, bytes), 0, data);
  } catch (const Error& e) {
    h.fail(name, e);
  }
}

void run_alltoall(Harness& h, DataType type, std::size_t count, bool in_place, std::uint64_t salt) {
  const std::size_t bytes = count * datatype_size(type);
  const auto rank = static_cast<std::size_t>(h.rank()), world = static_cast<std::size_t>(h.world());
  char* send = h.a();
  char* recv = in_place ? send : h.b();
  std::vector<std::uint8_t> input;
  for (std::size_t p = 0; p < world; ++p) {
    auto block = pattern_bytes(bytes, rank, 100 + p, salt);  // what this rank sends to p
    input.insert(input.end(), block.begin(), block.end());
  }
  h.upload(send, input);
  if (!in_place) h.poison(recv, world * bytes);
  const std::string name = describe_case("alltoall", type, count, in_place ? "in-place" : "");
  try {
    h.comm().alltoall(h.stream(), send, recv, count, type);
    auto got = h.download(recv, world * bytes);
    for (std::size_t p = 0; p < world; ++p) {
      h.check_bytes(cat(name, " block from ", p), got, p * bytes, pattern_bytes(bytes, p, 100 + rank, salt));
    }
  } catch (const Error& e) {
    h.fail(name, e);
  }
}

/// Several multi-chunk allreduces of different sizes queued back to back on one stream, synchronized once: scratch
/// stages are reused across calls and the chunk layout changes between them while earlier reductions are queued.
void run_back_to_back(Harness& h, std::size_t large) {
  const DataType type = DataType::F32;
  const std::size_t element = datatype_size(type);
  const std::size_t counts[] = {large, large / 3 + 1, 7, large, large / 2 + 5};
  std::size_t offset = 0;
  std::vector<std::vector<std::uint8_t>> inputs;
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < std::size(counts); ++i) {
    offsets.push_back(offset);
    inputs.push_back(reduction_input(type, ReduceOp::Sum, h.rank(), 0, counts[i], 900 + i));
    h.upload(h.a(offset), inputs.back());
    offset += (counts[i] * element + 255) / 256 * 256;
  }
  if (offset > h.capacity()) {
    h.fail("back-to-back: buffers too small");
    return;
  }
  h.poison(h.b(), offset);
  try {
    for (std::size_t i = 0; i < std::size(counts); ++i) {
      h.comm().allreduce(h.stream(), h.a(offsets[i]), h.b(offsets[i]), counts[i], type, ReduceOp::Sum);
    }
    auto got = h.download(h.b(), offset);
    for (std::size_t i = 0; i < std::size(counts); ++i) {
      std::vector<std::uint8_t> part(got.begin() + static_cast<std::ptrdiff_t>(offsets[i]),
                                     got.begin() + static_cast<std::ptrdiff_t>(offsets[i] + counts[i] * element));
      h.check_reduced(cat("back-to-back allreduce #", i, " count ", counts[i]), type, ReduceOp::Sum, part, 0, 900 + i);
    }
  } catch (const Error& e) {
    h.fail("back-to-back allreduces", e);
  }
}

/// `calls` allgathers back to back on one stream, synchronized once, then `calls` allreduces over the same buffers
/// (as a benchmark sweeps one collective after another; coll_time_probe hung there on one GPU).
void run_allgathers_then_allreduces(Harness& h, std::size_t count, int calls, std::uint64_t salt) {
  const DataType type = DataType::F32;
  const std::size_t bytes = count * datatype_size(type);
  const auto rank = static_cast<std::size_t>(h.rank()), world = static_cast<std::size_t>(h.world());
  if (world * bytes > h.capacity()) {
    h.fail("allgathers then allreduces: buffers too small");
    return;
  }
  const std::string name = cat("allgathers then allreduces of ", count, " f32 per rank");
  const auto mine = pattern_bytes(bytes, rank, 0, salt);
  const auto addends = reduction_input(type, ReduceOp::Sum, h.rank(), 0, world * count, salt + 1);
  try {
    h.upload(h.a(), mine);
    for (int i = 0; i < calls; ++i) h.comm().allgather(h.stream(), h.a(), h.b(), count, type);
    auto gathered = h.download(h.b(), world * bytes);
    for (std::size_t r = 0; r < world; ++r) {
      h.check_bytes(cat(name, ": block ", r), gathered, r * bytes, pattern_bytes(bytes, r, 0, salt));
    }
    h.upload(h.a(), addends);
    for (int i = 0; i < calls; ++i) {
      h.comm().allreduce(h.stream(), h.a(), h.b(), world * count, type, ReduceOp::Sum);
    }
    h.check_reduced(name, type, ReduceOp::Sum, h.download(h.b(), world * bytes), 0, salt + 1);
  } catch (const Error& e) {
    h.fail(name, e);
  }
}

}  // namespace

// Every collective x every datatype x every operator, counts 1 and 1003 (not divisible by 2, 3, 4 or 8), in place
// and not, one multi-chunk size per collective, zero counts, a slow producer, unaligned buffers and back-to-back
// calls: all in one launch of the ranks. args: memory ("host"/"cuda"), then optionally the number of hosts when the
// ranks run on several, and their layout ("blocked", the default, or "mirrored": see host_layout).
PICKLE_CHILD(coll_matrix) {
  Communicator comm = make_comm(args.at(0));
  const int world = comm.world_size();
  // args[1], when given: the ranks run on that many hosts, and the collectives go in two levels.
  // Large enough for pipelines of several chunks (8 per block on host memory), bounded for 8 ranks on 2 cores.
  const std::size_t large = (std::size_t{1} << 17) * static_cast<std::size_t>(world) + 5;  // f32 allreduce
  const std::size_t large_block = (std::size_t{1} << 17) + 3;                              // per rank, 8-byte types
  Harness h(comm, std::max<std::size_t>(large * 8 * 2, large_block * 8 * static_cast<std::size_t>(world)) + 4096);
  if (args.size() > 1) h.host_of = host_layout(world, std::stoi(args[1]), args.size() > 2 ? args[2] : "blocked");
  std::uint64_t salt = 0;

  for (std::size_t count : {std::size_t{1}, std::size_t{1003}}) {
    for (DataType type : kTypes) {
      for (ReduceOp op : kOps) {
        run_allreduce(h, type, op, count, false, ++salt);
        run_allreduce(h, type, op, count, true, ++salt);
        for (int mode = 0; mode < 3; ++mode) run_reduce_scatter(h, type, op, count, mode, ++salt);
      }
      for (bool in_place : {false, true}) {
        run_allgather(h, type, count, in_place, ++salt);
        run_alltoall(h, type, count, in_place, ++salt);
        const int root = static_cast<int>(salt % static_cast<std::uint64_t>(world));
        run_broadcast(h, type, count, in_place, root, ++salt);
      }
    }
  }

  // Zero elements: a no-op on every rank (no message, nothing to wait for).
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), 0, DataType::F32, ReduceOp::Sum);
    comm.reduce_scatter(h.stream(), h.a(), h.b(), 0, DataType::F32, ReduceOp::Sum);
    comm.allgather(h.stream(), h.a(), h.b(), 0, DataType::F32);
    comm.alltoall(h.stream(), h.a(), h.b(), 0, DataType::F32);
    comm.broadcast(h.stream(), h.a(), h.b(), 0, DataType::F32, world - 1);
    h.stream().synchronize();
  } catch (const Error& e) {
    h.fail(cat("zero counts: ", e.what()));
  }

  run_allgathers_then_allreduces(h, large / static_cast<std::size_t>(world), 20, ++salt);
  ++salt;
  // Several pipeline chunks.
  run_allreduce(h, DataType::F32, ReduceOp::Sum, large, false, ++salt);
  run_allreduce(h, DataType::BF16, ReduceOp::Avg, large, true, ++salt);
  run_allreduce(h, DataType::I32, ReduceOp::Max, large, true, ++salt);
  run_allreduce(h, DataType::F64, ReduceOp::Prod, large / 2, false, ++salt);
  run_allreduce(h, DataType::F32, ReduceOp::Sum, large, false, ++salt, 1);  // 4 bytes off: no vector loads
  run_allreduce(h, DataType::F16, ReduceOp::Min, 1003, true, ++salt, 3);
  run_reduce_scatter(h, DataType::F64, ReduceOp::Sum, large_block, 0, ++salt);
  run_reduce_scatter(h, DataType::F32, ReduceOp::Avg, large_block, 1, ++salt);
  run_reduce_scatter(h, DataType::I64, ReduceOp::Min, large_block, 2, ++salt);
  run_alltoall(h, DataType::F64, large_block, true, ++salt);
  run_alltoall(h, DataType::F64, large_block, false, ++salt);
  run_allgather(h, DataType::I64, large_block, false, ++salt);
  run_broadcast(h, DataType::U8, large_block * 8, false, world - 1, ++salt);
  run_back_to_back(h, large);

  // A slow producer: the input is written by work still queued on the stream when the collective is called.
  {
    const std::size_t count = 4099;
    auto input = reduction_input(DataType::F32, ReduceOp::Sum, h.rank(), 0, count, ++salt);
    h.poison(h.a(), count * 4);
    h.stream().impl().host_callback([] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
    h.upload(h.a(), input);
    try {
      comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
      h.check_reduced("allreduce after a slow producer", DataType::F32, ReduceOp::Sum, h.download(h.b(), count * 4), 0,
                      salt);
    } catch (const Error& e) {
      h.fail("allreduce after a slow producer", e);
    }
  }

  comm.barrier();
  if (h.failures() > 0) std::fprintf(stderr, "rank %d: %d failures\n", comm.rank(), h.failures());
  return h.failures() == 0 ? 0 : 1;
}

// Bad arguments: InvalidArgument naming rank, operation and size, raised before any message, so that the
// collectives stay usable (checked by a correct allreduce afterwards).
PICKLE_CHILD(coll_errors) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank(), world = comm.world_size();
  Harness h(comm, 1 << 16);
  int failures = 0;
  auto expect = [&](const char* what, const std::string& needle, auto&& fn) {
    try {
      fn();
      std::fprintf(stderr, "rank %d: %s: no exception\n", rank, what);
      ++failures;
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      if (message.find(needle) == std::string::npos) {
        std::fprintf(stderr, "rank %d: %s: '%s' lacks '%s'\n", rank, what, message.c_str(), needle.c_str());
        ++failures;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s: wrong exception: %s\n", rank, what, e.what());
      ++failures;
    }
  };
  const std::string me = cat("rank ", rank, ": ");
  expect("root out of range", me + "broadcast of 64 bytes: root " + std::to_string(world), [&] {
    comm.broadcast(h.stream(), h.a(), h.b(), 16, DataType::F32, world);
  });
  expect("negative root", "root -1", [&] { comm.broadcast(h.stream(), h.a(), h.b(), 16, DataType::F32, -1); });
  expect("null send", me + "allreduce of 40 bytes: the send buffer is null", [&] {
    comm.allreduce(h.stream(), nullptr, h.b(), 10, DataType::F32, ReduceOp::Sum);
  });
  expect("null recv", "the recv buffer is null", [&] {
    comm.allgather(h.stream(), h.a(), nullptr, 10, DataType::U8);
  });
  expect("count overflow", "count overflow", [&] {
    comm.allgather(h.stream(), h.a(), h.b(), SIZE_MAX / 4, DataType::F64);
  });
  expect("past the allocation", "from the pointer on", [&] {
    comm.allreduce(h.stream(), h.a(), h.b(), 1 << 20, DataType::F32, ReduceOp::Sum);
  });
  expect("partial overlap", "overlap", [&] {
    comm.allreduce(h.stream(), h.a(), h.a(8), 100, DataType::F32, ReduceOp::Sum);
  });
  expect("alltoall partial overlap", "overlap", [&] {
    comm.alltoall(h.stream(), h.a(), h.a(4), 16, DataType::U8);
  });
  if (comm.memory_kind() == MemoryKind::Host) {
    std::vector<float> plain(64);  // not memory pickle allocated: it cannot be announced to peers
    expect("unshareable memory", "not memory pickle can share", [&] {
      comm.allreduce(h.stream(), plain.data(), h.b(), 16, DataType::F32, ReduceOp::Sum);
    });
  } else {
    auto host = device::allocate(MemoryKind::Host, 4096);
    expect("wrong memory kind", "is host memory but this communicator moves cuda memory", [&] {
      comm.allreduce(h.stream(), host->data(), h.b(), 16, DataType::F32, ReduceOp::Sum);
    });
  }
  expect("reserved tag (send)", "tags below 0 are reserved for collectives", [&] {
    comm.send((rank + 1) % world, -1, h.a(), 8);
  });
  expect("reserved tag (recv)", "tags below 0 are reserved for collectives", [&] {
    comm.recv((rank + 1) % world, -5, h.a(), 8);
  });
  // Still usable.
  run_allreduce(h, DataType::I32, ReduceOp::Sum, 333, false, 77);
  comm.barrier();
  return failures + h.failures() == 0 ? 0 : 1;
}

// Two ranks as two threads of this process, each with its Communicator (one CUDA context on one GPU): allgathers,
// then allreduces. On CUDA the first reduction used to load its kernel lazily, which synchronizes the context, while
// the other rank's stream waited for data that this rank sends only after that launch: a deadlock that separate
// processes (a context each) never meet. args: memory.
PICKLE_CHILD(coll_two_ranks_as_threads) {
  const std::string memory = args.at(0);
  // Both ranks' streams share one context: give them hardware queues enough not to share one (docs/p2p.md).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  const int port = free_tcp_port();
  std::atomic<int> failures{0};
  auto rank_main = [&](int rank) {
    try {
      Communicator::Options options;
      options.rank_info = thread_rank_info(rank, 2, port);
      options.memory = memory == "cuda" ? MemoryKind::Cuda : MemoryKind::Host;
      Communicator comm(options);
      const std::size_t count = std::size_t{1} << 17;  // 512 KiB per rank: one chunk per call
      Harness h(comm, 2 * count * 4);
      run_allgathers_then_allreduces(h, count, 20, 41);
      failures.fetch_add(h.failures());
      comm.barrier();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d (a thread): %s\n", rank, e.what());
      failures.fetch_add(1);
    }
  };
  std::thread first(rank_main, 0), second(rank_main, 1);
  first.join();
  second.join();
  return failures.load() == 0 ? 0 : 1;
}

/// The elements of the failure children's float allreduces, by args[1]: "small" 1000 (one-shot, or through the
/// mailboxes: their LL form on one CTA), "medium" 20000 (80 KB: through the mailboxes, the LL form on 5 CTAs by
/// default), else large enough for several chunks, and on four ranks for the fused pipeline.
std::size_t failure_child_count(const std::vector<std::string>& args, int world) {
  const std::string size = args.size() > 1 ? args[1] : "";
  if (size == "small") return 1000;
  if (size == "medium") return 20000;
  return (std::size_t{1} << 18) * static_cast<std::size_t>(world);
}

// A rank dies (SIGKILL, from a thread, at an arbitrary point of a series of multi-chunk allreduces): every other
// rank's collective call or stream synchronize fails with PeerError or TimeoutError, promptly, and later calls fail
// fast. Rank 0 dies (its store goes with it, so that the survivors' teardown does not wait). args: memory.
PICKLE_CHILD(coll_peer_death) {
  // The communicator goes before the buffers (see the end): after a failed collective, peers that finished their
  // side may still write into this rank's receive buffer until the communicator is destroyed (collectives.md).
  std::optional<Communicator> held(make_comm(args.at(0)));
  Communicator& comm = *held;
  const std::size_t count = failure_child_count(args, comm.world_size());  // args[1]: small, medium or none
  Harness h(comm, count * 4);
  run_allreduce(h, DataType::F32, ReduceOp::Sum, count, false, 5);  // everything set up and working
  if (h.failures() != 0) return 1;
  comm.barrier();
  if (comm.rank() == 0) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ::kill(::getpid(), SIGKILL);
    }).detach();
  }
  Stopwatch watch;
  std::string failure;
  ErrorCode code = ErrorCode::Internal;
  for (int i = 0; i < 100000 && failure.empty(); ++i) {
    try {
      comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
      h.stream().synchronize();
    } catch (const Error& e) {
      failure = e.what();
      code = e.code();
    }
  }
  const double seconds = watch.seconds();
  std::fprintf(stderr, "rank %d: failed after %.2f s: %s\n", comm.rank(), seconds, failure.c_str());
  if (failure.empty() || (code != ErrorCode::Peer && code != ErrorCode::Timeout)) return 1;
  if (failure.find("allreduce") == std::string::npos) return 2;
  if (seconds > env::timeout_seconds() + 5) return 3;
  // The sequence is broken now: the next call fails at once instead of mismatching messages.
  Stopwatch again;
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
    h.stream().synchronize();
    return 4;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Peer && e.code() != ErrorCode::Timeout) return 5;
  }
  if (again.seconds() > 2) return 6;
  // What a failed collective leaves on the stream (waits on its side streams and sends) runs out first: streams
  // are synchronized before their communicator goes. Then the communicator, then the buffers.
  try {
    h.stream().synchronize();
  } catch (const Error&) {
    // the failure already reported
  }
  held.reset();
  return 0;
}

// A peer that stays alive but never joins a collective (the last rank skips one allreduce): every other rank's call
// fails with a TimeoutError naming that peer and the allreduce within PICKLE_TIMEOUT, never hangs; its stream drains
// (what the failed call left queued, token waits on the other survivors included, runs out: the ordered schedule's
// owed tokens are raised by the failed calls, Call::abandon); and the next collective fails at once. The last rank
// stays alive throughout and meets the others in a barrier at the end. Exit codes name the check that failed.
PICKLE_CHILD(coll_absent_peer) {
  Communicator comm = make_comm(args.at(0));
  const int world = comm.world_size(), absent = world - 1;
  // Large enough for several chunks, and on four ranks for the fused pipeline, whose ordered tokens the survivors
  // then owe each other (a one-shot allreduce raises none). args[1] "small" or "medium" (failure_child_count): calls
  // that fit a mailbox (PICKLE_ALLREDUCE_SCHEDULE=mailbox): the survivors' calls return at once, their streams wait
  // for the absent rank's count, and the progress thread's watch fails the pair as a timeout.
  const std::size_t count = failure_child_count(args, world);
  Harness h(comm, count * 4);
  run_allreduce(h, DataType::F32, ReduceOp::Sum, count, false, 7);  // everything set up and working
  if (h.failures() != 0) return 1;
  comm.barrier();
  const double timeout = env::timeout_seconds();
  if (comm.rank() == absent) {
    // Alive and reachable, but in no collective: the others time out waiting for its receives. It reaches the
    // barrier a second after the others' calls fail, and waits for them up to PICKLE_TIMEOUT more: room for them to
    // be late by most of PICKLE_TIMEOUT on a loaded machine.
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout + 1));
    comm.barrier();
    return 0;
  }
  Stopwatch watch;
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
    h.stream().synchronize();
    std::fprintf(stderr, "rank %d: the allreduce without rank %d succeeded\n", comm.rank(), absent);
    return 2;
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "rank %d: failed after %.2f s: %s\n", comm.rank(), watch.seconds(), e.what());
    if (message.find("allreduce") == std::string::npos || message.find(cat("peer ", absent)) == std::string::npos) {
      return 3;
    }
  }
  if (watch.seconds() > timeout + 5) return 4;
  // What the failed call queued runs out: no wait is left on a word that nobody will raise.
  Stopwatch drain;
  try {
    h.stream().synchronize();
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: the stream reported: %s\n", comm.rank(), e.what());
  }
  if (drain.seconds() > 5) return 5;
  Stopwatch again;
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
    return 6;
  } catch (const Error& e) {
    if (std::string(e.what()).find("allreduce") == std::string::npos) return 7;
  }
  if (again.seconds() > 2) return 8;
  comm.barrier();
  return 0;
}

// Many small allreduces through the mailboxes (PICKLE_ALLREDUCE_SCHEDULE=mailbox) enqueued without a synchronize
// between them: more calls than cells and than label entries (so both go round several times), sizes that change
// from call to call, in place and not, the calls alternating between two streams (a call on the other stream must
// wait for the one before), and rank 0's host held back at the start, so that the others' hosts run far ahead of it
// (their labels overwrite entries it has not compared yet, which it must skip, not mistake). Every result is checked
// at the end. args: memory.
PICKLE_CHILD(coll_mailbox_back_to_back) {
  Communicator comm = make_comm(args.at(0));
  constexpr int kCalls = 150;
  const std::size_t counts[] = {1, 1003, 4096, 37, 20000, 10000};
  const DataType type = DataType::F32;
  std::vector<std::size_t> offsets;
  std::vector<std::vector<std::uint8_t>> inputs;
  std::size_t total = 0;
  for (int i = 0; i < kCalls; ++i) {
    const std::size_t count = counts[static_cast<std::size_t>(i) % std::size(counts)];
    offsets.push_back(total);
    inputs.push_back(reduction_input(type, ReduceOp::Sum, comm.rank(), 0, count, 3000 + static_cast<std::uint64_t>(i)));
    total += (count * datatype_size(type) + 255) / 256 * 256;
  }
  Harness h(comm, total);
  Stream other = comm.make_stream();
  h.poison(h.b(), total);
  for (std::size_t i = 0; i < inputs.size(); ++i) h.upload(h.a(offsets[i]), inputs[i]);
  h.stream().synchronize();
  comm.barrier();
  if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  try {
    for (int i = 0; i < kCalls; ++i) {
      const auto at = static_cast<std::size_t>(i);
      const std::size_t count = counts[at % std::size(counts)];
      const bool in_place = i % 3 == 2;
      Stream& on = i % 7 < 4 ? h.stream() : other;
      char* send = h.a(offsets[at]);
      // In place: the input is copied into recv first, on the call's stream.
      if (in_place) on.impl().copy(h.b(offsets[at]), send, count * datatype_size(type));
      comm.allreduce(on, in_place ? h.b(offsets[at]) : send, h.b(offsets[at]), count, type, ReduceOp::Sum);
    }
    other.synchronize();
    auto got = h.download(h.b(), total);
    for (int i = 0; i < kCalls; ++i) {
      const auto at = static_cast<std::size_t>(i);
      const std::size_t count = counts[at % std::size(counts)];
      const auto first = got.begin() + static_cast<std::ptrdiff_t>(offsets[at]);
      std::vector<std::uint8_t> part(first, first + static_cast<std::ptrdiff_t>(count * datatype_size(type)));
      h.check_reduced(cat("mailbox allreduce #", i, " count ", count), type, ReduceOp::Sum, part, 0,
                      3000 + static_cast<std::uint64_t>(i));
    }
  } catch (const Error& e) {
    h.fail("mailbox allreduces", e);
  }
  comm.barrier();
  return h.failures() == 0 ? 0 : 1;
}

// In-place allreduces through the mailboxes at addresses that are not 16-byte aligned (bf16, f32 and u8 sums at
// offsets of 2, 4 and 1 bytes): 8 KB and up to 32 KiB, with tails of a partial line, and 200 KB, which the LL form
// (where PICKLE_ALLREDUCE_LL_MAX lets it) takes on one CTA (8 KB) and on several; and up to about 1 MiB, which the
// loads form, pulled or pushed, would spread over several CTAs if the call were aligned (unaligned in place it runs on
// one: mailbox.cpp). Both publish the input that the in-place reduction overwrites, and must not let a peer read an
// element this rank has already reduced. args: memory.
PICKLE_CHILD(coll_mailbox_in_place_unaligned) {
  Communicator comm = make_comm(args.at(0));
  struct Case {
    DataType type;
    std::size_t count;
    std::size_t offset;
  };
  const Case cases[] = {{DataType::BF16, 4095, 2},  {DataType::BF16, 16383, 2},  {DataType::F32, 8191, 4},
                        {DataType::U8, 32765, 1},   {DataType::BF16, 100001, 2}, {DataType::BF16, 300001, 2},
                        {DataType::F32, 200003, 4}, {DataType::U8, 1000003, 1}};
  Harness h(comm, (std::size_t{1} << 20) + 4096);
  std::uint64_t salt = 7000;
  for (const Case& one : cases) {
    const std::size_t bytes = one.count * datatype_size(one.type);
    const std::string name =
        cat("in-place ", datatype_name(one.type), " allreduce of ", one.count, " at offset ", one.offset);
    try {
      // Kept until the download: the upload is a copy on the stream.
      const auto input = reduction_input(one.type, ReduceOp::Sum, comm.rank(), 0, one.count, ++salt);
      h.upload(h.b(one.offset), input);
      comm.allreduce(h.stream(), h.b(one.offset), h.b(one.offset), one.count, one.type, ReduceOp::Sum);
      h.check_reduced(name, one.type, ReduceOp::Sum, h.download(h.b(one.offset), bytes), 0, salt);
    } catch (const Error& e) {
      h.fail(name, e);
    }
  }
  comm.barrier();
  return h.failures() == 0 ? 0 : 1;
}

// Ranks that pass different counts to allreduces through the mailboxes (both small enough for them): the labels
// tell, in the first call (each rank writes its label before it reads the others'). A rank that sees the mismatch
// names the peer and both sizes and tells the others, whose streams may wait on it: every rank fails well within
// PICKLE_TIMEOUT with an error naming the allreduce, the peer and "out of step", none returns a result, and the
// communicator is broken afterwards. Exit codes name the failed check.
PICKLE_CHILD(coll_mailbox_count_mismatch) {
  Communicator comm = make_comm(args.at(0));
  Harness h(comm, 1 << 16);
  comm.barrier();
  const std::size_t count = comm.rank() == 0 ? 1000 : 2000;
  Stopwatch watch;
  std::string failure;
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
    h.stream().synchronize();
  } catch (const Error& e) {
    failure = e.what();
  }
  std::fprintf(stderr, "rank %d: failed after %.2f s: %s\n", comm.rank(), watch.seconds(), failure.c_str());
  if (failure.empty()) return 1;
  const int peer = 1 - comm.rank();
  if (failure.find("allreduce") == std::string::npos || failure.find(cat("peer ", peer)) == std::string::npos ||
      failure.find("out of step") == std::string::npos) {
    return 2;
  }
  if (watch.seconds() > env::timeout_seconds() / 2) return 3;
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
    return 4;
  } catch (const Error& e) {
    if (std::string(e.what()).find("out of step") == std::string::npos) return 5;
  }
  comm.barrier();  // neither rank leaves while the other may still be hearing of it
  return 0;
}

// Ranks that pass different counts to one allreduce (a caller's bug): rank 0 a count small enough for the one-shot
// form, the others one large enough for the fused pipeline. Every rank must fail with an error naming the allreduce
// well within PICKLE_TIMEOUT (the two forms share their first tag, so the first send meets a receive of another
// size), not wait for posts that never come. Exit codes name the check that failed.
PICKLE_CHILD(coll_count_mismatch) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t large = std::size_t{1} << 21;  // 8 MiB of f32: fused on two ranks (one-shot stops at 4 MiB)
  Harness h(comm, large * 4);
  comm.barrier();
  const std::size_t count = comm.rank() == 0 ? 1000 : large;
  Stopwatch watch;
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
    h.stream().synchronize();
    std::fprintf(stderr, "rank %d: an allreduce of %zu elements against another count succeeded\n", comm.rank(), count);
    return 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: failed after %.2f s: %s\n", comm.rank(), watch.seconds(), e.what());
    if (std::string(e.what()).find("allreduce") == std::string::npos) return 2;
  }
  if (watch.seconds() > env::timeout_seconds() / 2) return 3;
  try {
    h.stream().synchronize();
  } catch (const Error&) {
    // reported above
  }
  return 0;
}

/// After a peer died, `stream`'s synchronize must throw PeerError naming `collective` and `peer`, within half of
/// PICKLE_TIMEOUT of `watch`'s start. The child's exit code: 0 when it does, 1 when synchronize succeeded (although
/// `lost`), 2 when the error names something else, 3 when it came late.
int synchronize_reports_peer_death(Stream& stream, const Stopwatch& watch, int rank, const char* collective, int peer,
                                   const char* lost) {
  try {
    stream.synchronize();
    std::fprintf(stderr, "rank %d: synchronize succeeded although %s\n", rank, lost);
    return 1;
  } catch (const PeerError& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "rank %d: %s\n", rank, message.c_str());
    if (message.find(collective) == std::string::npos || message.find(cat("peer ", peer)) == std::string::npos) {
      return 2;
    }
  }
  return watch.seconds() > env::timeout_seconds() / 2 ? 3 : 0;
}

// A peer dies after its call returned but before its copies ran (its stream held back by a slow producer): this
// rank's call returns normally, and the stream synchronize reports the lost data as a PeerError. Two ranks.
// args: memory [destroy_first]: rank 1 destroys its communicator before it synchronizes the stream; the error must
// survive it (the teardown runs the call's check, which uses the communicator, once the stream passed the call).
PICKLE_CHILD(coll_death_after_call) {
  const bool destroy_first = args.size() > 1 && args[1] == "destroy_first";
  std::optional<Communicator> held(make_comm(args.at(0)));
  Communicator& comm = *held;
  const std::size_t count = 1000;
  Harness h(comm, count * 4);
  run_allreduce(h, DataType::F32, ReduceOp::Sum, count, false, 6);
  if (h.failures() != 0) return 1;
  comm.barrier();
  // Hold this rank's stream: rank 0 for good (it dies while held), rank 1 briefly.
  const int hold_ms = comm.rank() == 0 ? 10000 : 300;
  h.stream().impl().host_callback([hold_ms] { std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms)); });
  comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);  // both calls return
  // Rank 1 says that its call returned; then rank 0 dies (not through the store: rank 0 hosts it).
  Buffer note = comm.alloc(64);
  if (comm.rank() == 0) {
    comm.recv(1, 0, note.data(), 64).wait();
    ::kill(::getpid(), SIGKILL);
  }
  comm.send(0, 0, note.data(), 64).wait();
  Stopwatch watch;
  if (destroy_first) held.reset();
  return synchronize_reports_peer_death(h.stream(), watch, 1, "allreduce", 0, "the peer's data never came");
}

// An allreduce whose first net write on rank 0 is refused (PICKLE_TEST_FAIL_NET_WRITE=1 there: rank 0's send of
// block 1 to rank 1). Rank 1 never gets that block and would reduce whatever its scratch held, then send the result
// on; rank 0's own receives all arrive. Every rank must hear of it, naming the allreduce: none may succeed with wrong
// data, and with two ranks none may succeed at all. Rank 0 hears it from the synchronize, or from the allreduce call
// itself when the stream's callback failed the write before the call's last look at its stream (a stream's error
// goes to the first call that sees it: 2 runs in 25 on 2 cores). With a root as a second argument, two small broadcasts from it come first (found by
// review): on two hosts the two-level broadcast runs its across-hosts step only on the ranks of the root's index, and
// when calls were numbered per step the ranks of a host then numbered the allreduce apart, so that the loss of one
// went unnoticed by the other (two ranks succeeded with a wrong sum). args: memory, [the broadcasts' root].
PICKLE_CHILD(coll_net_write_refused) {
  if (std::stoi(env::foreign("RANK").value()) == 0) ::setenv("PICKLE_TEST_FAIL_NET_WRITE", "1", 1);
  Communicator comm = make_comm(args.at(0));
  const std::size_t count = 1 << 14;
  Harness h(comm, count * 4);
  if (args.size() > 1) {
    const std::vector<float> small(4, 1.0f);
    for (int i = 0; i < 2; ++i) {
      h.stream().impl().copy(h.a(), small.data(), small.size() * sizeof(float));
      comm.broadcast(h.stream(), h.a(), h.b(), small.size(), DataType::F32, std::stoi(args[1]));
    }
    h.stream().synchronize();
  }
  std::vector<float> in(count, static_cast<float>(comm.rank() + 1));
  h.stream().impl().copy(h.a(), in.data(), count * 4);
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), count, DataType::F32, ReduceOp::Sum);
    h.stream().synchronize();
    // On two hosts a rank may get only data that the refused write was not on the path of (rank 0's result send
    // of the across-hosts step refused before its input send, when those two callbacks run in that order: rank 0
    // had every contribution, and its host's allgather carries the right sum). Then, and only then, it may succeed.
    std::vector<float> out(count);
    h.stream().impl().copy(out.data(), h.b(), count * 4);
    h.stream().synchronize();
    const int world = comm.world_size();
    const auto sum = static_cast<float>(world * (world + 1) / 2);
    const auto wrong = std::count_if(out.begin(), out.end(), [&](float x) { return x != sum; });
    std::fprintf(stderr, "rank %d: the allreduce succeeded although rank 0's send was never written; %zd of %zu "
                 "elements wrong\n", comm.rank(), static_cast<std::ptrdiff_t>(wrong), count);
    return wrong == 0 && world > 2 ? 0 : 1;
  } catch (const Error& e) {
    int named = -2;  // the peer a PeerError names
    if (const auto* peer_error = dynamic_cast<const PeerError*>(&e)) named = peer_error->peer();
    std::fprintf(stderr, "rank %d (peer() %d): %s\n", comm.rank(), named, e.what());
    const std::string what = e.what();
    if (what.find("allreduce") == std::string::npos) return 2;
    // A peer, as a rank of this communicator (a two-level step's errors are translated from its group's ranks).
    if (named != -2 && (named < 0 || named >= comm.world_size() || named == comm.rank())) return 4;
    // A loss quoted in a two-level call's error names the step it was noted in, whose numbers the quote keeps (it
    // may be the other step's: "among the ranks of this host (0, 1): ... (across hosts (ranks 0, 2): rank 0 ->
    // peer 1: ...").
    const bool two_levels = what.find("among the ranks of this host (") != std::string::npos ||
                            what.find("across hosts (ranks ") != std::string::npos;
    const std::string quoted = "this rank lost data in this collective or an earlier one (";
    if (const auto at = what.find(quoted); two_levels && at != std::string::npos) {
      const std::string quote = what.substr(at + quoted.size());
      if (quote.rfind("among the ranks of this host (", 0) != 0 && quote.rfind("across hosts (ranks ", 0) != 0) {
        return 5;
      }
    }
    // The refusal itself (rank 0's write), or the failed pair it caused: not a timeout or an argument error.
    if (e.code() != ErrorCode::Peer && what.find("PICKLE_TEST_FAIL_NET_WRITE") == std::string::npos) return 3;
  }
  return 0;
}

// A block one rank lost, passed on by the rank that reduced it to a third rank whose own messages all arrive (the
// known gap of docs/collectives.md until 2026-11-30). Three ranks, an allreduce of 4 floats under
// PICKLE_ALLREDUCE_SCHEDULE=fused: one 16-byte block, rank 0's. Rank 2's stream drops its send unrun (it gives a wait
// up after the call was queued): rank 0's receive from rank 2 fails alone, rank 0's stream goes on, reduces what its
// scratch held and sends that to ranks 1 and 2. Rank 1 receives only from rank 0, and that arrives: before, its
// synchronize succeeded with a sum that lacked rank 2's part. Now rank 0 tells the ranks of its host that it lost
// data in that collective before its stream goes on, and rank 1's end check fails the call naming rank 0; over net
// rank 0 refuses to write its result, which fails the pair. Under PICKLE_PIPELINE_SCHEDULE=ordered rank 1's copy to
// rank 0 waits for a token of rank 2's, which its stream dropped too: rank 2 raises it from the host (it ended in
// PICKLE_TIMEOUT before). args: memory ("host"), then "refused" where a refused net write must be what fails rank 1
// (not only its end check).
PICKLE_CHILD(coll_lost_block_reaches_a_third_rank) {
  std::optional<Communicator> held(make_comm(args.at(0)));
  Communicator& comm = *held;
  const bool refused = args.size() > 1 && args[1] == "refused";
  const char* schedule = std::getenv("PICKLE_PIPELINE_SCHEDULE");
  const bool ordered = schedule != nullptr && std::string(schedule) == "ordered";
  const int rank = comm.rank();
  constexpr std::size_t kCount = 4;
  Buffer in = comm.alloc(kCount * sizeof(float)), out = comm.alloc(kCount * sizeof(float));
  const std::vector<float> values(kCount, static_cast<float>(rank + 1));
  std::string what;
  if (rank == 2) {
    HostStreamThatGivesUp dropping;
    Stream stream(dropping.stream);
    stream.impl().copy(in.data(), values.data(), sizeof(float) * kCount);
    comm.allreduce(stream, in.data(), out.data(), kCount, DataType::F32, ReduceOp::Sum);
    CHILD_CHECK(dropping.give_up(), "the stream never gave its wait up");
    CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::System, "record was dropped", what), what);
  } else {
    Stream stream = comm.make_stream();
    stream.impl().copy(in.data(), values.data(), sizeof(float) * kCount);
    comm.allreduce(stream, in.data(), out.data(), kCount, DataType::F32, ReduceOp::Sum);
    if (rank == 0) {
      // Its own receive names what failed. Under the ordered pipeline over net, rank 1's copy into rank 0 waits for
      // rank 2's token, raised from the host once rank 2 heard of the drop: by then rank 1 may have learned of rank
      // 0's or rank 2's loss and refused to write, and rank 0's check meets that failed receive first.
      const bool failed = throws_with([&] { stream.synchronize(); }, ErrorCode::Peer, "", what);
      const bool refused_by_rank_1 = what.find("rank 1 -> peer 0: send of 16 bytes (tag -5): not written: peer ") !=
                                         std::string::npos &&
                                     what.find("lost data in this collective") != std::string::npos;
      CHILD_CHECK(failed && (what.find("peer 2's send of 16 bytes") != std::string::npos ||
                             (ordered && refused && refused_by_rank_1)),
                  what);
    } else {
      // From its end check (ipc, shm: "peer 0 lost data in this collective"), or over net from its receive, whose
      // pair rank 0 failed by refusing to write what it had not got ("this rank lost data in this collective").
      CHILD_CHECK(throws_with([&] { stream.synchronize(); }, ErrorCode::Peer, "lost data in this collective", what),
                  what);
      CHILD_CHECK(what.find("rank 1: allreduce of 16 bytes") != std::string::npos, what);
      CHILD_CHECK(what.find("peer 0") != std::string::npos, what);
      if (refused) {
        // Refused by rank 0 (it had not got rank 2's block), or (ordered, see rank 0) by this rank, which had heard
        // of rank 0's or rank 2's loss before its own copy into rank 0 could go.
        CHILD_CHECK((what.find("could not be written: rank 0") != std::string::npos &&
                     what.find("not written: this rank lost data in this collective or an earlier one (rank 0 "
                               "-> peer 2: recv of 16 bytes") != std::string::npos) ||
                        (ordered &&
                         what.find("rank 1 -> peer 0: send of 16 bytes (tag -5): not written: peer ") !=
                             std::string::npos),
                    what);
      }
    }
    std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  }
  // The communicator first: rank 2's receive of the result, which its dropped stream no longer waits for, may still
  // be copied into `out` (over shm by this rank's own receiving stream) until the teardown has drained it.
  held.reset();
  return 0;
}

// A collective that fails its arguments on one rank only (before any message: that rank's communicator stays
// usable) while the other rank's call times out waiting for it. Rank 0's call gets a null recv; rank 1's call into
// `stale` gives up after PICKLE_TIMEOUT. Rank 0 then calls the collective again, properly: nothing of it may land in
// rank 1's `stale` (a ready signal that rank 1 raised for its failed call would let it). Found by review.
// args: memory, allgather|broadcast (rank 0 is the root).
/// Request::wait gives up after PICKLE_TIMEOUT, which this test keeps short; the notes between its ranks may take
/// longer (one rank's collective is timing out meanwhile): poll for up to a minute.
void wait_polling(Request request) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!request.test()) {
    if (std::chrono::steady_clock::now() > give_up) throw TimeoutError("test note: not complete after 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

PICKLE_CHILD(coll_one_rank_fails_its_arguments) {
  Communicator comm = make_comm(args.at(0));
  const bool broadcast = args.at(1) == "broadcast";
  const int rank = comm.rank();
  const std::size_t count = 256, bytes = count * 4;
  Buffer send = comm.alloc(bytes), stale = comm.alloc(2 * bytes), note = comm.alloc(64);
  Stream stream = comm.make_stream();
  const std::vector<std::uint8_t> mine(bytes, static_cast<std::uint8_t>(0xA0 + rank)), poison(2 * bytes, 0xEE);
  stream.impl().copy(send.data(), mine.data(), bytes);
  stream.impl().copy(stale.data(), poison.data(), 2 * bytes);
  stream.synchronize();
  if (rank == 0) {
    try {
      if (broadcast) comm.broadcast(stream, send.data(), nullptr, count, DataType::F32, 0);
      if (!broadcast) comm.allgather(stream, send.data(), nullptr, count, DataType::F32);
      std::fprintf(stderr, "rank 0: a call into a null buffer was accepted\n");
      return 1;
    } catch (const InvalidArgument&) {
    }
    wait_polling(comm.recv(1, 9, note.data(), 64));  // rank 1's call has failed by now
    Buffer fresh = comm.alloc(2 * bytes);
    try {
      if (broadcast) comm.broadcast(stream, send.data(), fresh.data(), count, DataType::F32, 0);
      if (!broadcast) comm.allgather(stream, send.data(), fresh.data(), count, DataType::F32);
    } catch (const Error& e) {
      std::fprintf(stderr, "rank 0: the second call threw: %s\n", e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // time for a wrong copy to land
    comm.send(1, 10, note.data(), 64).wait();
    try {
      stream.synchronize();  // may time out (rank 1 is no longer in step): what matters is rank 1's buffer
    } catch (const Error&) {
    }
    return 0;
  }
  try {
    if (broadcast) comm.broadcast(stream, send.data(), stale.data(), count, DataType::F32, 0);
    if (!broadcast) comm.allgather(stream, send.data(), stale.data(), count, DataType::F32);
    std::fprintf(stderr, "rank 1: the call returned although rank 0 never joined it\n");
  } catch (const Error& e) {
    std::fprintf(stderr, "rank 1: %s\n", e.what());
  }
  comm.send(0, 9, note.data(), 64).wait();
  wait_polling(comm.recv(0, 10, note.data(), 64));
  std::size_t landed = 0;
  for (std::size_t i = 0; i < bytes; ++i) landed += static_cast<const std::uint8_t*>(stale.data())[i] == 0xA0;
  if (landed != 0) {
    std::fprintf(stderr, "rank 1: %zu bytes of rank 0's later call landed in the failed call's buffer\n", landed);
    return 1;
  }
  return 0;
}

// A collectives setting with a bad value (PICKLE_COLL_CHUNK that is not a positive multiple of 4096, an unknown
// PICKLE_ALLGATHER_SCHEDULE): the first collective fails with an InvalidArgument naming the variable, before any
// message (so every rank fails alike). args: memory, the variable.
PICKLE_CHILD(coll_bad_setting) {
  Communicator comm = make_comm(args.at(0));
  const std::string variable = args.at(1);
  Harness h(comm, 4096);
  try {
    comm.allreduce(h.stream(), h.a(), h.b(), 16, DataType::F32, ReduceOp::Sum);
    std::fprintf(stderr, "rank %d: allreduce accepted %s=%s\n", comm.rank(), variable.c_str(),
                 std::getenv(variable.c_str()));
    return 1;
  } catch (const InvalidArgument& e) {
    if (std::string(e.what()).find(variable) == std::string::npos) {
      std::fprintf(stderr, "rank %d: the error does not name %s: %s\n", comm.rank(), variable.c_str(), e.what());
      return 2;
    }
  }
  return 0;
}

// PICKLE_COLL_CHUNK set on rank 1 only: creating the communicator fails on both ranks with an InvalidArgument that
// names the variable, both values and the peer, instead of a collective failing partway. args: memory.
PICKLE_CHILD(coll_chunk_setting_differs) {
  const int rank = std::stoi(env::foreign("RANK").value());
  if (rank == 1) ::setenv("PICKLE_COLL_CHUNK", "8192", 1);
  try {
    Communicator comm = make_comm(args.at(0));
    std::fprintf(stderr, "rank %d: a communicator was made although PICKLE_COLL_CHUNK differs\n", rank);
    return 1;
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "rank %d: %s\n", rank, message.c_str());
    const std::string other = cat("peer ", 1 - rank);
    if (message.find("PICKLE_COLL_CHUNK=8192") == std::string::npos ||
        message.find("PICKLE_COLL_CHUNK=(unset)") == std::string::npos || message.find(other) == std::string::npos) {
      return 2;
    }
  }
  return 0;
}

// A setting that must agree (PICKLE_ALLREDUCE_SCHEDULE, PICKLE_PIPELINE_SCHEDULE) set on rank 1 only: spelled as its
// default, the ranks agree (the settings are compared as they take effect) and an allreduce runs; set to another
// value, creation fails on both ranks naming the variable and both values. args: memory, the variable, the value
// rank 1 sets.
PICKLE_CHILD(coll_setting_on_one_rank) {
  const int rank = std::stoi(env::foreign("RANK").value());
  const std::string variable = args.at(1), value = args.at(2);
  std::string fallback;  // the setting's default, which rank 0 runs with
  for (const auto& known : env::table()) {
    if (known.name == variable) fallback = std::string(known.default_value);
  }
  if (rank == 1) ::setenv(variable.c_str(), value.c_str(), 1);
  try {
    Communicator comm = make_comm(args.at(0));
    if (value != fallback) {
      std::fprintf(stderr, "rank %d: a communicator was made although rank 1 has %s=%s\n", rank, variable.c_str(),
                   value.c_str());
      return 1;
    }
    Harness h(comm, 4096);
    run_allreduce(h, DataType::F32, ReduceOp::Sum, 1000, false, 7);
    comm.barrier();
    return h.failures() == 0 ? 0 : 3;
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "rank %d: %s\n", rank, message.c_str());
    if (value == fallback) return 4;
    if (message.find(cat(variable, "=", value)) == std::string::npos ||
        message.find(cat(variable, "=", fallback)) == std::string::npos) {
      return 2;
    }
  }
  return 0;
}

// A broadcast's root receives nothing: only its stream's wait for each peer's ready signal tells it whether the peer
// was there to take the data. Rank 1 holds its stream, calls broadcast (so its ready signal is queued behind the
// hold), says so, and dies: the root's wait is released by the failure, its copy goes nowhere, and its stream's
// synchronize must throw PeerError naming the broadcast and the peer, not succeed. args: memory.
PICKLE_CHILD(coll_broadcast_root_peer_dies_before_ready) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t count = 1000;
  Harness h(comm, count * 4);
  comm.broadcast(h.stream(), h.a(), h.b(), count, DataType::F32, 0);  // one that works, first
  h.stream().synchronize();
  comm.barrier();
  if (comm.rank() == 1) {
    h.stream().impl().host_callback([] { std::this_thread::sleep_for(std::chrono::seconds(10)); });
  }
  comm.broadcast(h.stream(), h.a(), h.b(), count, DataType::F32, 0);  // both calls return
  Buffer note = comm.alloc(64);
  if (comm.rank() == 1) {
    comm.send(0, 0, note.data(), 64).wait();
    ::kill(::getpid(), SIGKILL);
  }
  comm.recv(1, 0, note.data(), 64).wait();
  Stopwatch watch;
  return synchronize_reports_peer_death(h.stream(), watch, 0, "broadcast", 1,
                                        "peer 1 died before it was ready for the data");
}

// The collectives whose peers write straight into this rank's receive buffer (allgather, alltoall, broadcast) after
// this rank's earlier stream work: rank 1 holds its stream for 200 ms, then fills the receive buffer with poison,
// then calls the collective. Peers may write only once the stream has reached the call, so the gathered data must
// win over the poison whatever the transport. Host memory. args: memory.
PICKLE_CHILD(coll_ready_after_stream) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank(), world = comm.world_size();
  const std::size_t count = 256, block = count * 4, bytes = block * static_cast<std::size_t>(world);
  Buffer send = comm.alloc(bytes), recv = comm.alloc(bytes);
  Stream stream = comm.make_stream();
  const std::vector<std::uint8_t> mine(bytes, static_cast<std::uint8_t>(rank + 1)), poison(bytes, 0xEE);
  std::vector<std::uint8_t> got(bytes);
  int failures = 0;
  for (const char* name : {"allgather", "alltoall", "broadcast"}) {
    const std::string which = name;
    stream.impl().copy(send.data(), mine.data(), bytes);
    if (rank == 1) stream.impl().host_callback([] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); });
    stream.impl().copy(recv.data(), poison.data(), bytes);
    if (which == "allgather") comm.allgather(stream, send.data(), recv.data(), count, DataType::F32);
    if (which == "alltoall") comm.alltoall(stream, send.data(), recv.data(), count, DataType::F32);
    if (which == "broadcast") comm.broadcast(stream, send.data(), recv.data(), count * world, DataType::F32, 0);
    stream.impl().copy(got.data(), recv.data(), bytes);
    stream.synchronize();
    for (int p = 0; p < world; ++p) {
      const auto want = static_cast<std::uint8_t>(which == "broadcast" ? 1 : p + 1);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < block; ++i) wrong += got[static_cast<std::size_t>(p) * block + i] != want;
      if (wrong != 0) {
        std::fprintf(stderr, "rank %d: %s: block %d has %zu wrong bytes (the poison landed after the data)\n", rank,
                     name, p, wrong);
        ++failures;
      }
    }
    comm.barrier();
  }
  return failures == 0 ? 0 : 1;
}

// A host-side send must not wait behind a collective's stream work: rank 1's stream waits for rank 0's message (tag
// 5) and then runs an allgather; rank 0 calls the allgather and then sends the message, waiting on the host. Valid
// on every transport (no host wait depends on a stream); a transport that queued the message behind the allgather's
// data deadlocks. Two ranks. args: memory.
PICKLE_CHILD(coll_send_not_behind_collective) {
  Communicator comm = make_comm(args.at(0));
  const int rank = comm.rank();
  const std::size_t count = 1024;
  Buffer send = comm.alloc(count * 4), recv = comm.alloc(count * 4 * 2), note = comm.alloc(64);
  Stream stream = comm.make_stream();
  Stopwatch watch;
  try {
    if (rank == 1) {
      comm.recv(0, 5, note.data(), 64).on_stream(stream);
      comm.allgather(stream, send.data(), recv.data(), count, DataType::F32);
    } else {
      comm.allgather(stream, send.data(), recv.data(), count, DataType::F32);
      comm.send(1, 5, note.data(), 64).wait();
    }
    stream.synchronize();
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: failed after %.2f s: %s\n", rank, watch.seconds(), e.what());
    return 1;
  }
  comm.barrier();
  return 0;
}

// Large allreduces (f32 sum out of place, bf16 sum in place), every element checked, `rounds` times (each round with
// inputs of its own: five calls or more reuse a mailbox's cells). args: memory, MiB[, rounds = 1].
PICKLE_CHILD(coll_large) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t bytes = std::stoull(args.at(1)) << 20;
  const int rounds = args.size() > 2 ? std::stoi(args.at(2)) : 1;
  Harness h(comm, bytes);
  for (int round = 0; round < rounds; ++round) {
    const auto salt = static_cast<std::uint64_t>(11 + 2 * round);
    run_allreduce(h, DataType::F32, ReduceOp::Sum, bytes / 4, false, salt);
    run_allreduce(h, DataType::BF16, ReduceOp::Sum, bytes / 2, true, salt + 1);
  }
  comm.barrier();
  return h.failures() == 0 ? 0 : 1;
}

// Alltoalls where the ranks differ in working in place: even ranks in place (the pipeline, through scratch), odd
// ranks out of place (straight into recv), so that each pairing of the two sends and receives the same chunks in
// the same order per peer. Counts of one element, of part of a chunk and of several chunks (with a page-sized
// PICKLE_COLL_CHUNK), then the other way round; every block checked. args: memory.
PICKLE_CHILD(coll_alltoall_mixed_in_place) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t counts[] = {1, 700, 5 * 4096 + 3};
  Harness h(comm, counts[2] * 8 * static_cast<std::size_t>(comm.world_size()));
  std::uint64_t salt = 40;
  for (int flip = 0; flip < 2; ++flip) {
    const bool in_place = (comm.rank() + flip) % 2 == 0;
    for (std::size_t count : counts) run_alltoall(h, DataType::F64, count, in_place, ++salt);
  }
  comm.barrier();
  return h.failures() == 0 ? 0 : 1;
}

// PICKLE_ALLGATHER_OWN_COPY as the environment sets it (local or relay): allgathers where the ranks differ in working
// in place (even ranks in place, odd ones out of place, then the other way round), of one element, of a few thousand
// and of several MiB; every block checked (recv poisoned first), and the bytes this rank wrote into its peers'
// memory counted (its block to each peer, plus with relay the block of rank - 1 sent back to it, over ipc), and
// the bytes it copied inside its own memory (its own block, out of place and not relayed). args: memory.
PICKLE_CHILD(coll_allgather_own_copy) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t world = static_cast<std::size_t>(comm.world_size());
  // This rank sends rank - 1's block back, and gets its own from rank + 1, only where that pair uses ipc.
  const int previous = (comm.rank() + comm.world_size() - 1) % comm.world_size();
  const int next = (comm.rank() + 1) % comm.world_size();
  const bool relay_mode = env::get("PICKLE_ALLGATHER_OWN_COPY") == "relay";
  const bool relay = relay_mode && comm.transport(previous) == "ipc";
  const bool relayed_to_me = relay_mode && comm.transport(next) == "ipc";
  const std::size_t counts[] = {1, 3001, (std::size_t{3} << 20) / 4 + 5};
  Harness h(comm, counts[2] * 4 * world);
  auto sent_bytes = [&] {
    const CommStats stats = comm.stats();
    return stats.ipc.bytes + stats.shm.bytes + stats.net.bytes;
  };
  auto copied_locally = [&] { return comm.stats().local_copy_bytes; };
  std::uint64_t salt = 60;
  for (int flip = 0; flip < 2; ++flip) {
    const bool in_place = (comm.rank() + flip) % 2 == 0;
    for (std::size_t count : counts) {
      const std::uint64_t before = sent_bytes(), local_before = copied_locally();
      run_allgather(h, DataType::F32, count, in_place, ++salt);
      const std::uint64_t sent = sent_bytes() - before, local = copied_locally() - local_before, bytes = count * 4;
      const std::uint64_t expected = (world - 1) * bytes + (relay ? bytes : 0);
      if (sent != expected) {
        h.fail(cat("allgather of ", count, " f32", in_place ? " in place" : "", ": wrote ", sent,
                   " bytes into the peers; expected ", expected, relay ? " (relay)" : " (local)"));
      }
      // The own block is copied locally only out of place and when it does not come back from rank + 1.
      const std::uint64_t expected_local = in_place || relayed_to_me ? 0 : bytes;
      if (local != expected_local) {
        h.fail(cat("allgather of ", count, " f32", in_place ? " in place" : "", ": copied ", local,
                   " bytes locally; expected ", expected_local));
      }
    }
  }
  comm.barrier();
  return h.failures() == 0 ? 0 : 1;
}

// Out-of-place allgathers of blocks large enough that each rank's own block is copied beside the sends, on a side
// stream of its own (Call::copy_beside), twice in a row: the gathered buffer is copied on the caller's stream right
// after the call (which must have waited for the own block's copy) and every byte checked, the own block's included.
// args: memory, MiB per block.
PICKLE_CHILD(coll_allgather_large_blocks) {
  Communicator comm = make_comm(args.at(0));
  const std::size_t block = std::stoull(args.at(1)) << 20;
  const std::size_t total = block * static_cast<std::size_t>(comm.world_size());
  Harness h(comm, total);
  Buffer after = comm.alloc(total);
  auto expected_byte = [](int rank, std::size_t i, int round) {
    return static_cast<std::uint8_t>((rank * 37 + round * 11 + i * 7 + i / 4093) & 0xff);
  };
  for (int round = 0; round < 2; ++round) {
    std::vector<std::uint8_t> mine(block);
    for (std::size_t i = 0; i < block; ++i) mine[i] = expected_byte(comm.rank(), i, round);
    h.upload(h.b(), mine);
    h.poison(h.a(), total);
    comm.allgather(h.stream(), h.b(), h.a(), block / 4, DataType::F32);
    h.stream().impl().copy(after.data(), h.a(), total);
    const std::vector<std::uint8_t> got = h.download(after.data(), total);
    for (int from = 0; from < comm.world_size(); ++from) {
      std::size_t wrong = 0, first = 0;
      for (std::size_t i = 0; i < block; ++i) {
        if (got[static_cast<std::size_t>(from) * block + i] != expected_byte(from, i, round) && wrong++ == 0) first = i;
      }
      if (wrong != 0) {
        h.fail(cat("round ", round, ": ", wrong, " wrong bytes in rank ", from, "'s block, the first at ", first));
      }
    }
  }
  comm.barrier();
  return h.failures() == 0 ? 0 : 1;
}

// Communicator::split: 5 ranks; ranks 0-3 split by parity with keys that reverse their order, rank 4 joins no
// group. Each group checks its ranks, an allreduce and a send/recv round, then (after the parent is gone) another
// allreduce; a second split of every rank into one group keeps the parent's order. A negative color other than
// kNoColor is refused on every rank before anything is exchanged. args: memory.
PICKLE_CHILD(comm_split) {
  std::optional<Communicator> parent(make_comm(args.at(0)));
  const int rank = parent->rank();
  CHILD_CHECK(parent->world_size() == 5, "run with 5 ranks");
  try {
    parent->split(-2, 0);
    CHILD_CHECK(false, "split(-2, 0) was accepted");
  } catch (const InvalidArgument& e) {
    CHILD_CHECK(std::string(e.what()).find("color -2") != std::string::npos, e.what());
  }
  const int color = rank == 4 ? Communicator::kNoColor : rank % 2;
  std::optional<Communicator> group = parent->split(color, -rank);
  if (rank == 4) {
    CHILD_CHECK(!group.has_value(), "a rank with kNoColor got a communicator");
  } else {
    CHILD_CHECK(group.has_value(), "no communicator for color ", color);
    // Keys -rank: the higher job rank comes first (color 0: ranks 2, 0; color 1: ranks 3, 1).
    const int expected_rank = rank < 2 ? 1 : 0;
    CHILD_CHECK(group->rank() == expected_rank && group->world_size() == 2, "rank ", rank, " is ", group->rank(),
                " of ", group->world_size(), " in its group");
    CHILD_CHECK(group->rank_info().source == "split", group->rank_info().source);
  }
  // Everyone in one group, in the parent's order: an allgather of each rank's job rank.
  {
    std::optional<Communicator> all = parent->split(7, 0);
    CHILD_CHECK(all && all->rank() == rank && all->world_size() == 5, "one group of all ranks");
    Harness h(*all, 4096);
    run_allgather(h, DataType::I32, 7, false, 500);
    all->barrier();
    CHILD_CHECK(h.failures() == 0, "allgather in the group of all ranks");
  }
  parent.reset();  // the groups outlive it
  if (!group) return 0;
  Harness h(*group, 1 << 20);
  for (std::uint64_t salt : {600u, 601u}) {
    run_allreduce(h, DataType::F32, ReduceOp::Sum, 1003, false, salt + static_cast<std::uint64_t>(color) * 10);
  }
  // Point to point inside the group: group ranks, group peers.
  const int peer = 1 - group->rank();
  const std::size_t bytes = 100000;
  Buffer out = group->alloc(bytes), in = group->alloc(bytes);
  fill(*group, out.data(), bytes, 700 + static_cast<std::uint64_t>(rank));
  Request r = group->recv(peer, 3, in.data(), bytes);
  group->send(peer, 3, out.data(), bytes).wait();
  r.wait();
  const int peer_job_rank = rank % 2 + 2 * (1 - rank / 2);  // the other rank of the same parity
  CHILD_CHECK(count_wrong(*group, in.data(), bytes, 700 + static_cast<std::uint64_t>(peer_job_rank)) == 0,
              "data from the group peer");
  group->barrier();
  return h.failures() == 0 ? 0 : 1;
}

// Each collective that goes in two levels across hosts (2 hosts of 2 consecutive ranks), checked, and how many bytes
// it sent over the network: in two levels (args[1] == "two") each byte crosses once per remote host, directly
// (PICKLE_COLL_HIERARCHY=0, "direct") once per remote rank. args: memory, "two" or "direct".
PICKLE_CHILD(coll_two_levels) {
  Communicator comm = make_comm(args.at(0));
  const bool two = args.at(1) == "two";
  const std::size_t count = std::size_t{1} << 16;  // f32: 256 KiB
  const std::size_t bytes = count * 4;
  Harness h(comm, 8 * bytes);  // reduce_scatter of `count` f64 per rank: 4 ranks x 512 KiB
  if (two) h.host_of = host_layout(comm.world_size(), 2, "blocked");
  run_allreduce(h, DataType::F32, ReduceOp::Sum, count, false, 800);  // makes the groups, if any
  auto network_bytes_of = [&](const std::function<void()>& call) {
    const std::uint64_t before = comm.stats().net.bytes;
    call();
    return comm.stats().net.bytes - before;
  };
  // A mismatch counts as a failure and the rank goes on, in step with its peers.
  auto expect_sent = [&](const char* what, std::uint64_t sent, std::uint64_t expected) {
    if (sent == expected) return;
    h.fail(cat("sent ", sent, " bytes over the network for ", what, "; expected ", expected,
               two ? " (two levels)" : " (direct)"));
  };
  // allreduce of 256 KiB: in two levels a rank's quarter of it goes to its counterpart on the other host and comes
  // back reduced (half the buffer in all), directly its block of each remote rank, twice (all of it).
  expect_sent("an allreduce of 256 KiB",
              network_bytes_of([&] { run_allreduce(h, DataType::F32, ReduceOp::Sum, count, true, 801); }),
              two ? bytes / 2 : bytes);
  // broadcast from rank 0: in two levels the root sends the buffer over the network once (to rank 2, its
  // counterpart on the other host, which passes it on inside its host), directly once per remote rank.
  expect_sent("a broadcast of 256 KiB from rank 0",
              network_bytes_of([&] { run_broadcast(h, DataType::U8, bytes, false, 0, 805); }),
              comm.rank() != 0 ? 0 : two ? bytes : 2 * bytes);
  // allgather of 256 KiB per rank: its part to the counterpart, or to both remote ranks.
  expect_sent("an allgather of 256 KiB per rank",
              network_bytes_of([&] { run_allgather(h, DataType::F32, count, false, 807); }), two ? bytes : 2 * bytes);
  // reduce_scatter of 256 KiB per rank: the host's partial for the counterpart, or a block to each remote rank.
  expect_sent("a reduce_scatter of 256 KiB per rank",
              network_bytes_of([&] { run_reduce_scatter(h, DataType::F32, ReduceOp::Sum, count, 0, 808); }),
              two ? bytes : 2 * bytes);
  run_broadcast(h, DataType::F32, 1003, true, 3, 806);
  // A count that leaves elements over (1003 = 2 * 501 + 1), an operator of each kind, and avg (always direct).
  run_allreduce(h, DataType::BF16, ReduceOp::Max, 1003, true, 802);
  run_allreduce(h, DataType::I32, ReduceOp::Prod, 1003, false, 803);
  run_allreduce(h, DataType::F64, ReduceOp::Avg, 1003, false, 804);
  // reduce_scatter's partials buffer grows, and its in-place forms; avg directly.
  run_reduce_scatter(h, DataType::F64, ReduceOp::Min, count, 1, 809);
  run_reduce_scatter(h, DataType::BF16, ReduceOp::Sum, 1003, 2, 810);
  run_reduce_scatter(h, DataType::F32, ReduceOp::Avg, 1003, 0, 811);
  run_allgather(h, DataType::U8, 1003, true, 812);
  comm.barrier();
  return h.failures() == 0 ? 0 : 1;
}

}  // namespace pickle::test
