// The GEMM foreground: cuBLASLt bf16 8192 x 8192 x 8192 with fp32 accumulation (the seed's "compute" shape), D =
// A^T B in cuBLASLt's column-major terms ("TN", the layout PyTorch's linear layers hand to cuBLAS). cuBLASLt's
// heuristic offers up to 8 algorithms; each is timed and the fastest is kept and reused (the heuristic's first is
// not always its fastest: on an H200 it ran 1.64 ms where PyTorch's matmul took 1.44 ms), so that every iteration
// runs the same kernel and gives the same bits. Checked once against an fp32 reference at sampled entries.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "interference_cublaslt.hpp"
#include "interference_foreground.hpp"
#include "interference_kernels.hpp"
#include "lockstep.hpp"
#include "table_text.hpp"

namespace pickle::bench {
namespace {

constexpr int kN = 8192;  // m = n = k
/// What cuBLAS itself recommends for Hopper (its docs on cublasSetWorkspace: 32 MiB on sm90, 4 MiB before); the
/// heuristic only offers algorithms whose workspace fits (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES).
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
/// Algorithms asked of the heuristic, and how each is timed: untimed runs, then single runs between events.
constexpr int kCandidates = 8, kCandidateWarmup = 3, kCandidateRuns = 5;
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
    info_.kernel = "cuBLASLt";
    info_.description = cat("cuBLASLt bf16 ", kN, "x", kN, "x", kN, ", fp32 accumulate");
    info_.flops = 2.0 * kN * static_cast<double>(kN) * kN;
    api_.emplace(CublasLtApi::load());
    info_.kernel = cat("cuBLASLt ", api_->version());
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
    std::vector<cublasLtMatmulHeuristicResult_t> candidates(kCandidates);
    int found = 0;
    api_->check(api_->heuristic(handle_, desc_, layout_a_, layout_b_, layout_d_, layout_d_, preference_, kCandidates,
                                candidates.data(), &found),
                "cublasLtMatmulAlgoGetHeuristic", what);
    if (found < 1) throw UnavailableError("foreground gemm: cuBLASLt has no algorithm for bf16 TN 8192^3 here");
    candidates.resize(static_cast<std::size_t>(found));
    choose_fastest(candidates, stream, deadline);

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
  /// Times each candidate (median of single runs between CUDA events, enqueued back to back so that the GPU never
  /// idles between them) and keeps the fastest in algo_; info_.detail says which won and what each reached. A
  /// candidate that cannot be launched is skipped.
  void choose_fastest(const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, cudaStream_t stream,
                      const Deadline& deadline) {
    const std::string what = "foreground gemm: timing cuBLASLt's candidates";
    std::vector<cuda::EventHandle> events;
    for (int i = 0; i < 2 * kCandidateRuns; ++i) events.emplace_back(true, what);
    std::vector<double> ms(candidates.size(), 0);  // 0: skipped
    std::vector<std::string> skipped;
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      algo_ = candidates[c].algo;
      try {
        enqueue(stream, kCandidateWarmup);
        for (int r = 0; r < kCandidateRuns; ++r) {
          cuda::check(cudaEventRecord(events[2 * r].get(), stream), "cudaEventRecord", what);
          enqueue(stream, 1);
          cuda::check(cudaEventRecord(events[2 * r + 1].get(), stream), "cudaEventRecord", what);
        }
      } catch (const Error& e) {
        cuda::wait_stream(stream, deadline, what);
        skipped.push_back(cat("#", c, ": ", plain_message(e)));
        continue;
      }
      cuda::wait_event(events.back().get(), deadline, what);
      std::vector<double> runs;
      for (int r = 0; r < kCandidateRuns; ++r) {
        float elapsed = 0;
        cuda::check(cudaEventElapsedTime(&elapsed, events[2 * r].get(), events[2 * r + 1].get()),
                    "cudaEventElapsedTime", what);
        runs.push_back(elapsed);
      }
      std::sort(runs.begin(), runs.end());
      ms[c] = runs[runs.size() / 2];
    }
    std::size_t best = candidates.size();
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      if (ms[c] > 0 && (best == candidates.size() || ms[c] < ms[best])) best = c;
    }
    if (best == candidates.size()) {
      throw Error(ErrorCode::Cuda, cat("foreground gemm: none of cuBLASLt's ", candidates.size(),
                                       " candidates could be launched: ", skipped.front()));
    }
    algo_ = candidates[best].algo;
    auto tflops = [&](double milliseconds) { return fixed(info_.flops / (milliseconds * 1e-3) / 1e12, 1); };
    std::string timings;
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      timings += cat(c == 0 ? "" : ", ", ms[c] > 0 ? cat(tflops(ms[c])) : std::string("skipped"));
    }
    info_.detail += cat("; fastest of ", candidates.size(), " heuristic candidates: #", best, " (",
                        describe_algo(candidates[best].algo), "), ", fixed(ms[best], 3), " ms = ", tflops(ms[best]),
                        " TFLOP/s; all, in the heuristic's order (TFLOP/s): ", timings);
  }

  /// "algo 21, tile 18, split-k 1" from the algorithm's configuration, or "configuration unknown".
  std::string describe_algo(const cublasLtMatmulAlgo_t& algo) const {
    if (api_->algo_config_get == nullptr) return "configuration unknown";
    std::int32_t id = 0, split_k = 1;
    std::uint32_t tile = 0;
    std::size_t written = 0;
    if (api_->algo_config_get(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &written) != CUBLAS_STATUS_SUCCESS ||
        api_->algo_config_get(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &written) !=
            CUBLAS_STATUS_SUCCESS ||
        api_->algo_config_get(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k, sizeof split_k, &written) !=
            CUBLAS_STATUS_SUCCESS) {
      return "configuration unknown";
    }
    return cat("algo ", id, ", tile ", tile, ", split-k ", split_k);
  }

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
