#pragma once
// The small kernels of `pickle bench interference` that are not the foreground: the background's checked data
// (the same pattern stream as pattern.hpp, generated and checked on the GPU, so that 16 GiB messages need neither
// host memory nor minutes of host time), the foregrounds' random inputs, the comparison of a foreground's output
// with its first run, and the sampled check of the GEMM. Each enqueues on `stream` and returns the launch's status.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace pickle::bench::kernels {

/// dst[0, bytes) = `rank`'s pattern stream from byte `first` (a multiple of 8), byte for byte as
/// bench::fill_source writes it on the host. dst must be 8-byte aligned.
cudaError_t fill_pattern(void* dst, std::size_t bytes, int rank, std::uint64_t first, cudaStream_t stream);

/// *wrong (device memory) += bytes of data[0, bytes) that differ from `rank`'s stream from byte `first` (a multiple of
/// 8). data may lie at any address (word by word where it is 8-byte aligned, byte by byte where not).
cudaError_t count_pattern_wrong(const void* data, std::size_t bytes, int rank, std::uint64_t first,
                                unsigned long long* wrong, cudaStream_t stream);

/// `count` bf16 values, uniform in [-scale, scale], from `seed` (the same seed gives the same values).
cudaError_t fill_random_bf16(void* dst, std::size_t count, std::uint64_t seed, float scale, cudaStream_t stream);

/// *differ (device memory) += the number of 16-bit elements where a[0, count) and b[0, count) differ.
cudaError_t count_differences_u16(const void* a, const void* b, std::size_t count, unsigned long long* differ,
                                  cudaStream_t stream);

/// The GEMM check: D = op(A) B in cuBLASLt's column-major terms with op(A) = A^T (A stored k x m, lda = k), B
/// stored k x n (ldb = k), D m x n (ldd = m), all bf16. For `samples` entries (i, j) picked from `seed`, computes
/// the fp32 reference sum_k A[k + i*lda] B[k + j*ldb] and writes |D(i, j) - reference| / sum_k |A||B| to
/// errors[s] (device memory): an error normalised by the sum's magnitude, a few 1e-5 for a right answer.
cudaError_t gemm_sample_errors(const void* a, const void* b, const void* d, int m, int n, int k, int samples,
                               std::uint64_t seed, float* errors, cudaStream_t stream);

}  // namespace pickle::bench::kernels
