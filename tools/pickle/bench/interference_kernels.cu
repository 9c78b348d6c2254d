#include "interference_kernels.hpp"

#include <cuda_bf16.h>

namespace pickle::bench::kernels {
namespace {

constexpr int kBlock = 256;

/// splitmix64's finaliser, as pattern.cpp's mix(): the device twin of the host's pattern.
__host__ __device__ __forceinline__ std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ std::uint64_t source_word(std::uint64_t rank_key, std::uint64_t word) {
  return mix(word ^ rank_key);
}

/// Blocks for a grid-stride loop over `items`: enough to fill the GPU, few enough that each thread loops.
unsigned grid_for(std::size_t items) {
  std::size_t blocks = (items + kBlock - 1) / kBlock;
  if (blocks > 4096) blocks = 4096;
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks);
}

__device__ __forceinline__ unsigned differing_bytes(std::uint64_t diff) {
  unsigned count = 0;
  for (; diff != 0; diff >>= 8) count += (diff & 0xFF) != 0;
  return count;
}

/// Adds a thread's count to *total: one atomic per warp.
__device__ __forceinline__ void add_warp_total(unsigned long long mine, unsigned long long* total) {
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0 && mine != 0) atomicAdd(total, mine);
}

__global__ void fill_pattern_kernel(std::uint64_t* dst, std::size_t bytes, std::uint64_t rank_key,
                                    std::uint64_t first_word) {
  const std::size_t words = bytes / 8;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    dst[w] = source_word(rank_key, first_word + w);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 8 != 0) {
    // The last bytes: the first bytes of the next word, in memory (little-endian) order, as the host's memcpy.
    const std::uint64_t value = source_word(rank_key, first_word + words);
    auto* tail = reinterpret_cast<std::uint8_t*>(dst + words);
    for (std::size_t i = 0; i < bytes % 8; ++i) tail[i] = static_cast<std::uint8_t>(value >> (8 * i));
  }
}

__global__ void count_pattern_kernel(const std::uint64_t* data, std::size_t bytes, std::uint64_t rank_key,
                                     std::uint64_t first_word, unsigned long long* wrong) {
  const std::size_t words = bytes / 8;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    mine += differing_bytes(data[w] ^ source_word(rank_key, first_word + w));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 8 != 0) {
    const std::uint64_t value = source_word(rank_key, first_word + words);
    const auto* tail = reinterpret_cast<const std::uint8_t*>(data + words);
    for (std::size_t i = 0; i < bytes % 8; ++i) mine += tail[i] != static_cast<std::uint8_t>(value >> (8 * i));
  }
  add_warp_total(mine, wrong);
}

/// count_pattern_kernel for data at any address, byte by byte: an allgather's section of rank r starts at r x the
/// share, which need not be a multiple of 8 (12 bytes over 4 ranks).
__global__ void count_pattern_bytes_kernel(const std::uint8_t* data, std::size_t bytes, std::uint64_t rank_key,
                                           std::uint64_t first_word, unsigned long long* wrong) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += stride) {
    const std::uint64_t value = source_word(rank_key, first_word + i / 8);
    mine += data[i] != static_cast<std::uint8_t>(value >> (8 * (i % 8)));
  }
  add_warp_total(mine, wrong);
}

__global__ void fill_random_bf16_kernel(__nv_bfloat16* dst, std::size_t count, std::uint64_t seed, float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float unit = static_cast<float>(mix(seed ^ mix(i)) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    dst[i] = __float2bfloat16_rn((2.0f * unit - 1.0f) * scale);
  }
}

__global__ void count_differences_kernel(const std::uint16_t* a, const std::uint16_t* b, std::size_t count,
                                         unsigned long long* differ) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    mine += a[i] != b[i];
  }
  add_warp_total(mine, differ);
}

__global__ void gemm_sample_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* d, int m,
                                   int n, int k, int samples, std::uint64_t seed, float* errors) {
  const int s = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (s >= samples) return;
  const std::size_t i = mix(seed ^ (2 * static_cast<std::uint64_t>(s) + 1)) % static_cast<std::uint64_t>(m);
  const std::size_t j = mix(seed ^ (2 * static_cast<std::uint64_t>(s) + 2)) % static_cast<std::uint64_t>(n);
  const __nv_bfloat16* arow = a + i * static_cast<std::size_t>(k);
  const __nv_bfloat16* bcol = b + j * static_cast<std::size_t>(k);
  float sum = 0.f, magnitude = 0.f;
  for (int x = 0; x < k; ++x) {
    const float product = __bfloat162float(arow[x]) * __bfloat162float(bcol[x]);
    sum += product;
    magnitude += fabsf(product);
  }
  const float got = __bfloat162float(d[i + j * static_cast<std::size_t>(m)]);
  errors[s] = magnitude > 0.f ? fabsf(got - sum) / magnitude : fabsf(got - sum);
}

}  // namespace

cudaError_t fill_pattern(void* dst, std::size_t bytes, int rank, std::uint64_t first, cudaStream_t stream) {
  if (first % 8 != 0 || reinterpret_cast<std::uintptr_t>(dst) % 8 != 0) return cudaErrorInvalidValue;
  if (bytes == 0) return cudaSuccess;
  const std::uint64_t rank_key = mix(static_cast<std::uint64_t>(rank) + 0x5eed);
  fill_pattern_kernel<<<grid_for(bytes / 8), kBlock, 0, stream>>>(static_cast<std::uint64_t*>(dst), bytes, rank_key,
                                                                   first / 8);
  return cudaGetLastError();
}

cudaError_t count_pattern_wrong(const void* data, std::size_t bytes, int rank, std::uint64_t first,
                                unsigned long long* wrong, cudaStream_t stream) {
  if (first % 8 != 0) return cudaErrorInvalidValue;
  if (bytes == 0) return cudaSuccess;
  const std::uint64_t rank_key = mix(static_cast<std::uint64_t>(rank) + 0x5eed);
  if (reinterpret_cast<std::uintptr_t>(data) % 8 != 0) {
    count_pattern_bytes_kernel<<<grid_for(bytes), kBlock, 0, stream>>>(static_cast<const std::uint8_t*>(data), bytes,
                                                                        rank_key, first / 8, wrong);
    return cudaGetLastError();
  }
  count_pattern_kernel<<<grid_for(bytes / 8), kBlock, 0, stream>>>(static_cast<const std::uint64_t*>(data), bytes,
                                                                    rank_key, first / 8, wrong);
  return cudaGetLastError();
}

cudaError_t fill_random_bf16(void* dst, std::size_t count, std::uint64_t seed, float scale, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  fill_random_bf16_kernel<<<grid_for(count), kBlock, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count, seed,
                                                                   scale);
  return cudaGetLastError();
}

cudaError_t count_differences_u16(const void* a, const void* b, std::size_t count, unsigned long long* differ,
                                  cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  count_differences_kernel<<<grid_for(count), kBlock, 0, stream>>>(
      static_cast<const std::uint16_t*>(a), static_cast<const std::uint16_t*>(b), count, differ);
  return cudaGetLastError();
}

cudaError_t gemm_sample_errors(const void* a, const void* b, const void* d, int m, int n, int k, int samples,
                               std::uint64_t seed, float* errors, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || k <= 0 || samples <= 0) return cudaErrorInvalidValue;
  const int block = 64;
  gemm_sample_kernel<<<(samples + block - 1) / block, block, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(b),
      static_cast<const __nv_bfloat16*>(d), m, n, k, samples, seed, errors);
  return cudaGetLastError();
}

}  // namespace pickle::bench::kernels
