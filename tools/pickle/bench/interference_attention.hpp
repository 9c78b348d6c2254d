#pragma once
// "pickle fused attention (own kernel)": the attention foreground of `pickle bench interference`, a bf16 forward
// pass O = softmax(Q K^T / sqrt(d)) V in the style of FlashAttention-2 (one kernel: Q, K and V tiles staged in shared
// memory by cp.async, S = Q K^T and O += P V on the tensor cores with mma.sync m16n8k16 bf16, fp32 accumulation and
// an online softmax, so that the seq x seq score matrix never reaches memory), and the simple reference kernel it is
// checked against. Tensors are [heads][seq][128] bf16, contiguous (batch and heads flattened); not causal.

#include <cstddef>

#include <cuda_runtime_api.h>

namespace pickle::bench::attention {

/// The head dimension the kernels are built for.
inline constexpr int kHeadDim = 128;
/// seq must be a multiple of this (the tile height of queries and keys).
inline constexpr int kTile = 64;

/// Raises the fused kernel's dynamic shared-memory limit (it needs more than the default 48 KiB). Call once per
/// process and device before launch_fused.
cudaError_t prepare_fused();

/// o = softmax(q k^T / sqrt(128)) v for `heads` independent (batch x head) slices of `seq` rows, on `stream`.
/// seq must be a positive multiple of kTile (cudaErrorInvalidValue otherwise).
cudaError_t launch_fused(const void* q, const void* k, const void* v, void* o, int heads, int seq, cudaStream_t stream);

/// The same in the plainest form: one thread per query row, fp32 throughout, fp32 output. For small shapes only.
cudaError_t launch_reference(const void* q, const void* k, const void* v, float* o, int heads, int seq,
                             cudaStream_t stream);

}  // namespace pickle::bench::attention
