// The fused attention kernel (FlashAttention-2's scheme) and its reference. Fragment layouts are PTX's for
// mma.sync.m16n8k16 with bf16 inputs (lane = 4 * group + t, group = lane / 4, t = lane % 4):
//   A 16x16 row-major: a0 = (group, 2t..2t+1), a1 = (group+8, 2t..), a2 = (group, 2t+8..), a3 = (group+8, 2t+8..)
//   B 16x8 "col": b0 = (k 2t..2t+1, n group), b1 = (k 2t+8..2t+9, n group)
//   C 16x8 fp32: c0,c1 = (group, 2t..2t+1), c2,c3 = (group+8, 2t..2t+1)
// ldmatrix.x4 loads four 8x8 bf16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and register i of a
// lane holds (row lane/4, columns 2(lane%4)..+1) of matrix i (with .trans: rows 2(lane%4)..+1 of column lane/4).
// With those, each fragment below comes from one ldmatrix, and the S accumulator of two adjacent 8-key tiles is
// exactly the A fragment of P for the 16 keys of P V (FlashAttention-2's register reuse).
#include "interference_attention.hpp"

#include <cstdint>

#include <cuda_bf16.h>

namespace pickle::bench::attention {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;              // 16 query rows each
constexpr int kThreads = kWarps * 32;
constexpr int kRowStride = kHeadDim + 8;  // 16 bytes of padding per row: the 8 rows of an ldmatrix hit 8 bank groups
constexpr int kTileElems = kTile * kRowStride;
// Q, two K buffers and two V buffers (the next key tile loads while this one is used).
constexpr std::size_t kSmemBytes = 5 * static_cast<std::size_t>(kTileElems) * sizeof(bf16);
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(shared)), "l"(global));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const bf16* shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(shared)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const bf16* shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(shared)));
}

/// d += a * b (16x8x16, bf16 in, fp32 accumulate).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two floats as a bf16 pair: `low` in the low half (the lower column index of a fragment).
__device__ __forceinline__ std::uint32_t pack_bf16(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<std::uint32_t*>(&pair);
}

/// cp.async of one 64 x 128 tile (rows of 256 bytes, contiguous in global memory) into padded shared rows.
__device__ __forceinline__ void load_tile(bf16* shared, const bf16* global, int thread) {
#pragma unroll
  for (int i = 0; i < kTile * kHeadDim / 8 / kThreads; ++i) {
    const int chunk = thread + i * kThreads;  // 16-byte chunks: 16 per row; neighbours take neighbouring chunks
    const int row = chunk / (kHeadDim / 8), column = (chunk % (kHeadDim / 8)) * 8;
    copy_async_16(shared + row * kRowStride + column, global + static_cast<std::size_t>(row) * kHeadDim + column);
  }
}

__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                           bf16* __restrict__ o, int seq, float scale_log2) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  bf16* const sq = reinterpret_cast<bf16*>(shared_bytes);
  bf16* const sk = sq + kTileElems;      // two buffers
  bf16* const sv = sk + 2 * kTileElems;  // two buffers

  const int thread = threadIdx.x, warp = thread / 32, lane = thread % 32;
  const std::size_t head_base = static_cast<std::size_t>(blockIdx.y) * seq * kHeadDim;
  const int first_query = blockIdx.x * kTile;
  const bf16* const qh = q + head_base + static_cast<std::size_t>(first_query) * kHeadDim;
  const bf16* const kh = k + head_base;
  const bf16* const vh = v + head_base;

  load_tile(sq, qh, thread);
  load_tile(sk, kh, thread);
  load_tile(sv, vh, thread);
  copy_async_commit();

  std::uint32_t qf[kHeadDim / 16][4];  // this warp's 16 query rows as A fragments, one per 16 columns of d
  float acc[kHeadDim / 8][4];          // O for 16 rows x 128 columns: one C fragment per 8 columns
#pragma unroll
  for (int t = 0; t < kHeadDim / 8; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};  // rows group and group + 8, in log2 units
  float row_sum[2] = {0.f, 0.f};              // this lane's share of the rows' sums (reduced at the end)

  const int tiles = seq / kTile;
  for (int j = 0; j < tiles; ++j) {
    // Tile j has landed, and every warp is done with the buffers of tile j - 1, which tile j + 1 now overwrites.
    copy_async_wait_all();
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        ldmatrix_x4(qf[kk], sq + (warp * 16 + lane % 16) * kRowStride + kk * 16 + (lane / 16) * 8);
      }
    }
    if (j + 1 < tiles) {
      const int next = (j + 1) & 1;
      const std::size_t offset = static_cast<std::size_t>(j + 1) * kTile * kHeadDim;
      load_tile(sk + next * kTileElems, kh + offset, thread);
      load_tile(sv + next * kTileElems, vh + offset, thread);
      copy_async_commit();
    }
    const bf16* const ck = sk + (j & 1) * kTileElems;
    const bf16* const cv = sv + (j & 1) * kTileElems;

    // S = Q K^T for 16 rows x 64 keys: eight 8-key C fragments.
    float s[kTile / 8][4];
#pragma unroll
    for (int t = 0; t < kTile / 8; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kTile / 16; ++np) {
        // Keys np*16 .. +15, d kk*16 .. +15: b0/b1 of key tile 2np, then of key tile 2np + 1.
        std::uint32_t b[4];
        ldmatrix_x4(b, ck + (np * 16 + lane % 8 + (lane / 16) * 8) * kRowStride + kk * 16 + ((lane / 8) % 2) * 8);
        mma_bf16(s[2 * np], qf[kk], b[0], b[1]);
        mma_bf16(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    // Online softmax: new running max per row (the 4 lanes of a group share a row), rescale what came before.
    float new_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int t = 0; t < kTile / 8; ++t) {
      s[t][0] *= scale_log2;
      s[t][1] *= scale_log2;
      s[t][2] *= scale_log2;
      s[t][3] *= scale_log2;
      new_max[0] = fmaxf(new_max[0], fmaxf(s[t][0], s[t][1]));
      new_max[1] = fmaxf(new_max[1], fmaxf(s[t][2], s[t][3]));
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      new_max[r] = fmaxf(new_max[r], __shfl_xor_sync(0xffffffffu, new_max[r], 1));
      new_max[r] = fmaxf(new_max[r], __shfl_xor_sync(0xffffffffu, new_max[r], 2));
    }
    const float correction[2] = {exp2f(row_max[0] - new_max[0]), exp2f(row_max[1] - new_max[1])};
    row_max[0] = new_max[0];
    row_max[1] = new_max[1];
    float tile_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int t = 0; t < kTile / 8; ++t) {
      s[t][0] = exp2f(s[t][0] - new_max[0]);
      s[t][1] = exp2f(s[t][1] - new_max[0]);
      s[t][2] = exp2f(s[t][2] - new_max[1]);
      s[t][3] = exp2f(s[t][3] - new_max[1]);
      tile_sum[0] += s[t][0] + s[t][1];
      tile_sum[1] += s[t][2] + s[t][3];
    }
    row_sum[0] = row_sum[0] * correction[0] + tile_sum[0];
    row_sum[1] = row_sum[1] * correction[1] + tile_sum[1];
#pragma unroll
    for (int t = 0; t < kHeadDim / 8; ++t) {
      acc[t][0] *= correction[0];
      acc[t][1] *= correction[0];
      acc[t][2] *= correction[1];
      acc[t][3] *= correction[1];
    }

    // O += P V: P's A fragment for keys kk*16 .. +15 is the S fragments of key tiles 2kk and 2kk + 1, in bf16.
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      const std::uint32_t p[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                  pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kHeadDim / 16; ++dp) {
        // Keys kk*16 .. +15 (rows of V), d dp*16 .. +15: b0/b1 of d tile 2dp, then of d tile 2dp + 1.
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, cv + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kRowStride + dp * 16 + (lane / 16) * 8);
        mma_bf16(acc[2 * dp], p, b[0], b[1]);
        mma_bf16(acc[2 * dp + 1], p, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
  const float inverse[2] = {1.f / row_sum[0], 1.f / row_sum[1]};
  const int group = lane / 4, t4 = lane % 4;
  bf16* const out = o + head_base + static_cast<std::size_t>(first_query + warp * 16) * kHeadDim;
#pragma unroll
  for (int t = 0; t < kHeadDim / 8; ++t) {
    const int column = t * 8 + 2 * t4;
    *reinterpret_cast<std::uint32_t*>(out + group * kHeadDim + column) =
        pack_bf16(acc[t][0] * inverse[0], acc[t][1] * inverse[0]);
    *reinterpret_cast<std::uint32_t*>(out + (group + 8) * kHeadDim + column) =
        pack_bf16(acc[t][2] * inverse[1], acc[t][3] * inverse[1]);
  }
}

__global__ void reference_attention_kernel(const bf16* q, const bf16* k, const bf16* v, float* o, int heads, int seq,
                                           float scale) {
  const long long index = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<long long>(heads) * seq) return;
  const std::size_t head_base = static_cast<std::size_t>(index / seq) * seq * kHeadDim;
  const bf16* const query = q + head_base + static_cast<std::size_t>(index % seq) * kHeadDim;
  float qrow[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) qrow[d] = __bfloat162float(query[d]);
  auto score = [&](int key) {
    const bf16* const krow = k + head_base + static_cast<std::size_t>(key) * kHeadDim;
    float dot = 0.f;
    for (int d = 0; d < kHeadDim; ++d) dot += qrow[d] * __bfloat162float(krow[d]);
    return dot * scale;
  };
  float max_score = -INFINITY;
  for (int key = 0; key < seq; ++key) max_score = fmaxf(max_score, score(key));
  float out[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) out[d] = 0.f;
  float sum = 0.f;
  for (int key = 0; key < seq; ++key) {
    const float weight = expf(score(key) - max_score);
    sum += weight;
    const bf16* const vrow = v + head_base + static_cast<std::size_t>(key) * kHeadDim;
    for (int d = 0; d < kHeadDim; ++d) out[d] += weight * __bfloat162float(vrow[d]);
  }
  float* const orow = o + static_cast<std::size_t>(index) * kHeadDim;
  for (int d = 0; d < kHeadDim; ++d) orow[d] = out[d] / sum;
}

}  // namespace

cudaError_t prepare_fused() {
  return cudaFuncSetAttribute(fused_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kSmemBytes));
}

cudaError_t launch_fused(const void* q, const void* k, const void* v, void* o, int heads, int seq,
                         cudaStream_t stream) {
  if (heads <= 0 || seq <= 0 || seq % kTile != 0 || heads > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(seq / kTile), static_cast<unsigned>(heads));
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(kHeadDim));
  fused_attention_kernel<<<grid, kThreads, kSmemBytes, stream>>>(
      static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v), static_cast<bf16*>(o),
      seq, scale_log2);
  return cudaGetLastError();
}

cudaError_t launch_reference(const void* q, const void* k, const void* v, float* o, int heads, int seq,
                             cudaStream_t stream) {
  if (heads <= 0 || seq <= 0) return cudaErrorInvalidValue;
  const long long rows = static_cast<long long>(heads) * seq;
  const int block = 128;
  reference_attention_kernel<<<static_cast<unsigned>((rows + block - 1) / block), block, 0, stream>>>(
      static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v), o, heads, seq,
      1.f / sqrtf(static_cast<float>(kHeadDim)));
  return cudaGetLastError();
}

}  // namespace pickle::bench::attention
