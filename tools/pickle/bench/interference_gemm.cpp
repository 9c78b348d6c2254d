// The GEMM foreground: cuBLASLt bf16 8192 x 8192 x 8192 with fp32 accumulation (the seed's "compute" shape), D =
// A^T B in cuBLASLt's column-major terms ("TN", the layout PyTorch's linear layers hand to cuBLAS). The algorithm is
// picked once by cuBLASLt's heuristic and reused, so that every iteration runs the same kernel and gives the same
// bits. Checked once against an fp32 reference at sampled entries.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "interference_cublaslt.hpp"
#include "interference_foreground.hpp"
#include "interference_kernels.hpp"

namespace pickle::bench {
namespace {

constexpr int kN = 8192;  // m = n = k
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
constexpr int kSamples = 64;
/// |D - reference| / sum |a b| at a sampled entry: bf16 rounding of D gives at most 2^-9 of |reference|, a few 1e-5
/// of the normalising sum for random inputs; a transposed or misplaced operand gives around 1e-2.
constexpr double kTolerance = 1e-3;

class GemmForeground final : public Foreground {
 public:
  ~GemmForeground() override {
    if (!api_) return;
    if (preference_ != nullptr) api_->preference_destroy(preference_);
    for (auto layout : {layout_a_, layout_b_, layout_d_}) {
      if (layout != nullptr) api_->layout_destroy(layout);
    }
    if (desc_ != nullptr) api_->desc_destroy(desc_);
    if (handle_ != nullptr) api_->destroy(handle_);
  }

  void enqueue(cudaStream_t stream, int iterations) override {
    const float alpha = 1.f, beta = 0.f;
    for (int i = 0; i < iterations; ++i) {
      api_->check(api_->matmul(handle_, desc_, &alpha, a_.data(), layout_a_, b_.data(), layout_b_, &beta, d_.data(),
                               layout_d_, d_.data(), layout_d_, &algo_, workspace_.data(), workspace_.bytes(), stream),
                  "cublasLtMatmul", "foreground gemm");
    }
  }

 protected:
  void prepare(cudaStream_t stream, const Deadline& deadline) override {
    info_.name = "gemm";
    info_.description = cat("cuBLASLt bf16 ", kN, "x", kN, "x", kN, ", fp32 accumulate");
    info_.flops = 2.0 * kN * static_cast<double>(kN) * kN;
    api_.emplace(CublasLtApi::load());
    info_.detail = cat("cuBLASLt ", api_->version(), " (", api_->path(), ")");
    const std::string what = "foreground gemm: set-up";
    const std::size_t elements = static_cast<std::size_t>(kN) * kN;
    a_ = cuda::DeviceBuffer(elements * 2, "foreground gemm: A");
    b_ = cuda::DeviceBuffer(elements * 2, "foreground gemm: B");
    d_ = cuda::DeviceBuffer(elements * 2, "foreground gemm: D");
    workspace_ = cuda::DeviceBuffer(kWorkspaceBytes, "foreground gemm: cuBLASLt workspace");
    cuda::check(kernels::fill_random_bf16(a_.data(), elements, 0xA11CE, 1.f, stream), "fill_random_bf16", what);
    cuda::check(kernels::fill_random_bf16(b_.data(), elements, 0xB0B, 1.f, stream), "fill_random_bf16", what);

    api_->check(api_->create(&handle_), "cublasLtCreate", what);
    api_->check(api_->desc_create(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", what);
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    api_->check(api_->desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
                "cublasLtMatmulDescSetAttribute(TRANSA)", what);
    api_->check(api_->desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep),
                "cublasLtMatmulDescSetAttribute(TRANSB)", what);
    // A is stored k x m (op(A) = A^T is m x k), B k x n, D m x n; all column-major with leading dimension = rows.
    api_->check(api_->layout_create(&layout_a_, CUDA_R_16BF, kN, kN, kN), "cublasLtMatrixLayoutCreate(A)", what);
    api_->check(api_->layout_create(&layout_b_, CUDA_R_16BF, kN, kN, kN), "cublasLtMatrixLayoutCreate(B)", what);
    api_->check(api_->layout_create(&layout_d_, CUDA_R_16BF, kN, kN, kN), "cublasLtMatrixLayoutCreate(D)", what);
    api_->check(api_->preference_create(&preference_), "cublasLtMatmulPreferenceCreate", what);
    const std::uint64_t workspace = kWorkspaceBytes;
    api_->check(api_->preference_set(preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                     sizeof workspace),
                "cublasLtMatmulPreferenceSetAttribute", what);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    api_->check(api_->heuristic(handle_, desc_, layout_a_, layout_b_, layout_d_, layout_d_, preference_, 1, &result,
                                &found),
                "cublasLtMatmulAlgoGetHeuristic", what);
    if (found < 1) throw UnavailableError("foreground gemm: cuBLASLt has no algorithm for bf16 TN 8192^3 here");
    algo_ = result.algo;

    // The check: one product, then sampled entries against an fp32 sum of the same bf16 inputs.
    enqueue(stream, 1);
    cuda::DeviceBuffer errors(kSamples * sizeof(float), "foreground gemm: check");
    cuda::check(kernels::gemm_sample_errors(a_.data(), b_.data(), d_.data(), kN, kN, kN, kSamples, 0x5A3B1E,
                                            errors.as<float>(), stream),
                "gemm_sample_errors", "foreground gemm: check");
    std::vector<float> host(kSamples);
    cuda::check(cudaMemcpyAsync(host.data(), errors.data(), errors.bytes(), cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync", "foreground gemm: check");
    cuda::wait_stream(stream, deadline, "foreground gemm: check");
    double worst = 0;
    for (float e : host) worst = std::isnan(e) ? HUGE_VAL : std::max(worst, static_cast<double>(e));
    info_.verify_error = worst;
    info_.verify_tolerance = kTolerance;
    info_.verify_shape = cat(kSamples, " sampled entries of the ", kN, "^3 product");
    if (!(worst <= kTolerance)) {
      throw Error(ErrorCode::Internal, cat("foreground gemm: the check failed: max error ", worst, " > ", kTolerance,
                                           " at sampled entries (normalised by sum |a b|)"));
    }
  }

  const void* output() const noexcept override { return d_.data(); }
  std::size_t output_elements() const noexcept override { return static_cast<std::size_t>(kN) * kN; }

 private:
  std::optional<CublasLtApi> api_;
  cuda::DeviceBuffer a_, b_, d_, workspace_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_d_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace

std::unique_ptr<Foreground> make_gemm_foreground() { return std::make_unique<GemmForeground>(); }

}  // namespace pickle::bench
