#include "interference_data_check.hpp"

#include <algorithm>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "interference_kernels.hpp"
#include "pattern.hpp"

namespace pickle::bench {
namespace {

/// Bytes of the self-check: not a multiple of 8, so that the tail path runs too.
constexpr std::size_t kSelfCheckBytes = 65536 + 5;
/// The odd offset of the self-check's unaligned count.
constexpr std::size_t kOddOffset = 3;

/// Copies one byte from the host to `dst` on the rank's stream.
void put_byte(RankState& s, void* dst, std::uint8_t value, const std::string& what) {
  cuda::check(cudaMemcpyAsync(dst, &value, 1, cudaMemcpyHostToDevice, s.stream->get()), "cudaMemcpyAsync", what);
  cuda::wait_stream(s.stream->get(), s.deadline(), what);
}

/// Throws unless the GPU counts `expected` wrong bytes in `data[0, bytes)` against this rank's pattern.
void expect_count(RankState& s, const void* data, std::size_t bytes, std::uint64_t expected, const char* where,
                  const std::string& what) {
  if (std::uint64_t wrong = count_wrong_on_gpu(s, data, bytes, s.rank, what); wrong != expected) {
    throw Error(ErrorCode::Internal, cat(what, ": the GPU counts ", wrong, " wrong bytes ", where, " (expected ",
                                         expected, ")"));
  }
}

}  // namespace

std::uint64_t count_wrong_on_gpu(RankState& s, const void* data, std::size_t bytes, int rank, const std::string& what) {
  cudaStream_t stream = s.stream->get();
  cuda::check(cudaMemsetAsync(s.counter->data(), 0, sizeof(unsigned long long), stream), "cudaMemsetAsync", what);
  cuda::check(kernels::count_pattern_wrong(data, bytes, rank, 0, s.counter->as<unsigned long long>(), stream),
              "count_pattern_wrong", what);
  unsigned long long wrong = 0;
  cuda::check(cudaMemcpyAsync(&wrong, s.counter->data(), sizeof wrong, cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync", what);
  cuda::wait_stream(stream, s.deadline(), what);
  return wrong;
}

void self_check_pattern(RankState& s, void* scratch, std::size_t scratch_bytes) {
  const std::string what = cat(describe({.rank = s.rank, .op = "bench interference pattern self-check"}));
  const std::size_t bytes = std::min(kSelfCheckBytes, scratch_bytes);
  if (bytes == 0) return;
  cudaStream_t stream = s.stream->get();
  auto* base = static_cast<std::uint8_t*>(scratch);
  cuda::check(kernels::fill_pattern(scratch, bytes, s.rank, 0, stream), "fill_pattern", what);
  std::vector<std::uint8_t> host(bytes);
  cuda::check(cudaMemcpyAsync(host.data(), scratch, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync", what);
  cuda::wait_stream(stream, s.deadline(), what);
  if (std::uint64_t wrong = count_wrong(host.data(), bytes, s.rank, 0); wrong != 0) {
    throw Error(ErrorCode::Internal, cat(what, ": the GPU's pattern differs from the host's in ", wrong, " bytes"));
  }
  expect_count(s, scratch, bytes, 0, "in a correct pattern", what);
  put_byte(s, base + bytes - 1, static_cast<std::uint8_t>(~host[bytes - 1]), what);  // the tail: the last path
  expect_count(s, scratch, bytes, 1, "where one was flipped", what);

  // At an odd address (the byte-by-byte path): the host's pattern copied there, then one byte of it flipped.
  if (scratch_bytes <= kOddOffset) return;
  const std::size_t odd_bytes = std::min(bytes, scratch_bytes - kOddOffset);
  std::uint8_t* odd = base + kOddOffset;
  cuda::check(cudaMemcpyAsync(odd, host.data(), odd_bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync", what);
  cuda::wait_stream(stream, s.deadline(), what);
  expect_count(s, odd, odd_bytes, 0, "in a correct pattern at an odd address", what);
  put_byte(s, odd + odd_bytes / 2, static_cast<std::uint8_t>(~host[odd_bytes / 2]), what);
  expect_count(s, odd, odd_bytes, 1, "where one was flipped at an odd address", what);
}

std::uint64_t count_received_wrong(RankState& s, const BackgroundRoles& roles, std::size_t bytes,
                                   const std::string& what) {
  if (roles.p2p) return count_wrong_on_gpu(s, s.recv_ptr(), bytes, 0, what);
  const std::size_t share = bytes / static_cast<std::size_t>(roles.ranks);
  std::uint64_t wrong = 0;
  for (int r = 0; r < roles.ranks; ++r) {
    wrong += count_wrong_on_gpu(s, static_cast<std::uint8_t*>(s.recv_ptr()) + static_cast<std::size_t>(r) * share,
                                share, r, what);
  }
  return wrong;
}

}  // namespace pickle::bench
