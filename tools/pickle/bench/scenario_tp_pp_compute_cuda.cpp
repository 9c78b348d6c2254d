// tp-pp's arithmetic on GPUs: cuBLASLt bf16 products with fp32 accumulation, enqueued on the context's CUDA stream.
// A row-major product D = A B is the column-major D^T = B^T A^T, so each call hands cuBLASLt B as its first operand
// and A as its second, untransposed, with the row strides as leading dimensions. Each shape gets its layouts and
// the heuristic's first algorithm once, reused by every later call of that shape: the same kernel every time, so
// the same inputs give the same bits (the scenario compares each configuration's output with its first).
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "interference_cublaslt.hpp"
#include "interference_cuda.hpp"
#include "interference_kernels.hpp"
#include "scenario_tp_pp_compute.hpp"

namespace pickle::bench {
namespace {

/// What cuBLAS recommends for Hopper (32 MiB); the heuristic only offers algorithms whose workspace fits.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

struct Plan {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

class CudaProxyCompute final : public ProxyCompute {
 public:
  explicit CudaProxyCompute(CollContext& ctx)
      : ctx_(ctx),
        stream_(static_cast<cudaStream_t>(ctx.stream().native_handle())),
        api_(CublasLtApi::load()),
        workspace_(kWorkspaceBytes, "tp-pp: cuBLASLt workspace"),
        counter_(sizeof(unsigned long long), "tp-pp: difference counter") {
    const std::string what = "tp-pp: cuBLASLt set-up";
    api_.check(api_.create(&handle_), "cublasLtCreate", what);
    api_.check(api_.desc_create(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", what);
    const cublasOperation_t keep = CUBLAS_OP_N;
    api_.check(api_.desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &keep, sizeof keep),
               "cublasLtMatmulDescSetAttribute(TRANSA)", what);
    api_.check(api_.desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep),
               "cublasLtMatmulDescSetAttribute(TRANSB)", what);
    api_.check(api_.preference_create(&preference_), "cublasLtMatmulPreferenceCreate", what);
    const std::uint64_t workspace = kWorkspaceBytes;
    api_.check(api_.preference_set(preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
               "cublasLtMatmulPreferenceSetAttribute", what);
  }

  ~CudaProxyCompute() override {
    for (auto& [shape, plan] : plans_) {
      for (auto layout : {plan.a, plan.b, plan.d}) {
        if (layout != nullptr) api_.layout_destroy(layout);
      }
    }
    if (preference_ != nullptr) api_.preference_destroy(preference_);
    if (desc_ != nullptr) api_.desc_destroy(desc_);
    if (handle_ != nullptr) api_.destroy(handle_);
  }

  std::string describe() const override {
    return cat("cuBLASLt ", api_.version(), " (", api_.path(), "), bf16 inputs, fp32 accumulate");
  }

  void fill_random(void* dst, std::size_t count, std::uint64_t seed, float scale) override {
    cuda::check(kernels::fill_random_bf16(dst, count, seed, scale, stream_), "fill_random_bf16", "tp-pp: weights");
  }

  void gemm(const void* a, const void* b, void* d, const ProxyGemm& s) override {
    const Plan& plan = plan_for(s);
    const float alpha = 1.f, beta = 0.f;
    api_.check(api_.matmul(handle_, desc_, &alpha, b, plan.a, a, plan.b, &beta, d, plan.d, d, plan.d, &plan.algo,
                           workspace_.data(), workspace_.bytes(), stream_),
               "cublasLtMatmul", cat("tp-pp: gemm ", s.m, " x ", s.n, " x ", s.k));
  }

  std::uint64_t count_differences(const void* a, const void* b, std::size_t count) override {
    const std::string what = "tp-pp: comparing outputs";
    cuda::check(cudaMemsetAsync(counter_.data(), 0, counter_.bytes(), stream_), "cudaMemsetAsync", what);
    cuda::check(kernels::count_differences_u16(a, b, count, counter_.as<unsigned long long>(), stream_),
                "count_differences_u16", what);
    unsigned long long differ = 0;
    cuda::check(cudaMemcpyAsync(&differ, counter_.data(), sizeof differ, cudaMemcpyDeviceToHost, stream_),
                "cudaMemcpyAsync", what);
    ctx_.stream().synchronize();
    return differ;
  }

 private:
  /// The layouts and algorithm of shape `s`, made on its first use.
  const Plan& plan_for(const ProxyGemm& s) {
    const auto key = std::make_tuple(s.m, s.n, s.k, s.lda, s.ldb, s.ldd);
    if (auto found = plans_.find(key); found != plans_.end()) return found->second;
    const std::string what = cat("tp-pp: cuBLASLt plan for ", s.m, " x ", s.n, " x ", s.k);
    Plan plan;
    // Column-major: B^T is n x k (ld ldb), A^T is k x m (ld lda), D^T is n x m (ld ldd).
    api_.check(api_.layout_create(&plan.a, CUDA_R_16BF, s.n, s.k, static_cast<std::int64_t>(s.ldb)),
               "cublasLtMatrixLayoutCreate(B^T)", what);
    api_.check(api_.layout_create(&plan.b, CUDA_R_16BF, s.k, s.m, static_cast<std::int64_t>(s.lda)),
               "cublasLtMatrixLayoutCreate(A^T)", what);
    api_.check(api_.layout_create(&plan.d, CUDA_R_16BF, s.n, s.m, static_cast<std::int64_t>(s.ldd)),
               "cublasLtMatrixLayoutCreate(D^T)", what);
    Plan& kept = plans_.emplace(key, plan).first->second;  // destroyed with the others from here on
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    api_.check(api_.heuristic(handle_, desc_, kept.a, kept.b, kept.d, kept.d, preference_, 1, &result, &found),
               "cublasLtMatmulAlgoGetHeuristic", what);
    if (found < 1) throw UnavailableError(cat(what, ": cuBLASLt has no algorithm for this shape"));
    kept.algo = result.algo;
    return kept;
  }

  CollContext& ctx_;
  cudaStream_t stream_;
  CublasLtApi api_;
  cuda::DeviceBuffer workspace_, counter_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  std::map<std::tuple<std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t>, Plan> plans_;
};

}  // namespace

std::unique_ptr<ProxyCompute> make_cuda_proxy_compute(CollContext& ctx) {
  return std::make_unique<CudaProxyCompute>(ctx);
}

}  // namespace pickle::bench
