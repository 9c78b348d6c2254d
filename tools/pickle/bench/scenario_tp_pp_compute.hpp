#pragma once
// The arithmetic of `pickle bench scenario tp-pp`'s layer proxy: bf16 matrix products with fp32 accumulation,
// enqueued on the scenario's timing stream, plus the fills and the comparison around them. On GPUs cuBLASLt does
// the products (loaded at run time, as for the interference suite's GEMM); on host memory a plain loop runs on the
// host stream's worker, so that the whole scenario, communication included, runs for real without a GPU.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "coll_context.hpp"

namespace pickle::bench {

/// D[m x n] = A[m x k] B[k x n], every matrix row-major bf16 with its own row stride (elements): A may be the first
/// k columns of a wider matrix (lda >= k).
struct ProxyGemm {
  std::size_t m = 0, n = 0, k = 0;
  std::size_t lda = 0, ldb = 0, ldd = 0;
};

class ProxyCompute {
 public:
  virtual ~ProxyCompute() = default;
  ProxyCompute(const ProxyCompute&) = delete;
  ProxyCompute& operator=(const ProxyCompute&) = delete;

  /// What does the products: "cuBLASLt 13.1.0 (path)", "host loop (fp32 accumulate)".
  virtual std::string describe() const = 0;
  /// `count` bf16 values uniform in [-scale, scale] from `seed`, written to `dst` before the stream's later work.
  virtual void fill_random(void* dst, std::size_t count, std::uint64_t seed, float scale) = 0;
  /// Enqueues D = A B on the context's stream.
  virtual void gemm(const void* a, const void* b, void* d, const ProxyGemm& shape) = 0;
  /// The number of 16-bit elements of a[0, count) and b[0, count) that differ, once the stream's work so far is
  /// done (waits for it).
  virtual std::uint64_t count_differences(const void* a, const void* b, std::size_t count) = 0;

 protected:
  ProxyCompute() = default;
};

/// The implementation for `ctx`'s memory: host loops for host memory, cuBLASLt for GPU memory (UnavailableError
/// when cuBLASLt cannot be loaded or this build has no CUDA).
std::unique_ptr<ProxyCompute> make_proxy_compute(CollContext& ctx);
std::unique_ptr<ProxyCompute> make_host_proxy_compute(CollContext& ctx);
#if PICKLE_HAVE_CUDA
std::unique_ptr<ProxyCompute> make_cuda_proxy_compute(CollContext& ctx);
#endif

}  // namespace pickle::bench
