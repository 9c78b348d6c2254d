// The attention foreground on the seed's shape, batch 8, heads 64, seq 4096, head dim 128, bf16, not causal, run by
// cuDNN's SDPA (interference_attention_cudnn.cpp) or by "pickle fused attention (own kernel)"
// (interference_attention.cu), as --attention says. Before it is timed, the chosen implementation runs on a small
// shape beside the simple reference kernel, with queries scaled up so that the softmax is far from uniform (a
// near-uniform softmax averages the values and would hide a wrong key order), and the largest difference must stay
// within the stated tolerance.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "interference_attention.hpp"
#include "interference_attention_kernel.hpp"
#include "interference_foreground.hpp"
#include "interference_kernels.hpp"
#include "lockstep.hpp"

namespace pickle::bench {
namespace {

constexpr int kBatch = 8, kHeads = 64, kSeq = 4096;
constexpr int kCheckHeads = 4, kCheckSeq = 512;
constexpr float kCheckQueryScale = 8.f;
/// bf16 rounding of P (2^-9 relative per weight) and of O (2^-9 of |O| <= 1) keep a right kernel near 3e-3; a wrong
/// fragment layout or key order is off by 1e-1 or more. cuDNN rounds at the same places (bf16 P for P V, bf16 O).
constexpr double kTolerance = 1e-2;
/// Below this the check's outputs would be too close to zero to tell a right kernel from a wrong one.
constexpr double kMinReferenceMagnitude = 5e-2;

float bf16_to_float(std::uint16_t bits) {
  std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

class AttentionForeground final : public Foreground {
 public:
  explicit AttentionForeground(AttentionImpl impl) : impl_(impl) {}

  void enqueue(cudaStream_t stream, int iterations) override {
    for (int i = 0; i < iterations; ++i) kernel_->launch(q_.data(), k_.data(), v_.data(), o_.data(), stream);
  }

 protected:
  void prepare(cudaStream_t stream, const Deadline& deadline) override {
    info_.name = "attention";
    info_.required = impl_ == AttentionImpl::Cudnn;
    // Q K^T and P V: 2 * seq * seq * d each, per head.
    info_.flops = 4.0 * kBatch * kHeads * static_cast<double>(kSeq) * kSeq * attention::kHeadDim;
    std::string declined;  // why auto did not take cuDNN
    if (impl_ != AttentionImpl::Own) {
      try {
        choose_cudnn();
      } catch (const UnavailableError& e) {
        if (impl_ == AttentionImpl::Cudnn) throw;
        declined = plain_message(e);
        check_kernel_.reset();
        kernel_.reset();
      }
    }
    if (!kernel_) choose_own();
    check_against_reference(stream, deadline);

    const std::size_t elements = static_cast<std::size_t>(kBatch) * kHeads * kSeq * attention::kHeadDim;
    q_ = cuda::DeviceBuffer(elements * 2, "foreground attention: Q");
    k_ = cuda::DeviceBuffer(elements * 2, "foreground attention: K");
    v_ = cuda::DeviceBuffer(elements * 2, "foreground attention: V");
    o_ = cuda::DeviceBuffer(elements * 2, "foreground attention: O");
    const std::string what = "foreground attention: inputs";
    cuda::check(kernels::fill_random_bf16(q_.data(), elements, 0x0051, 1.f, stream), "fill_random_bf16", what);
    cuda::check(kernels::fill_random_bf16(k_.data(), elements, 0x00C4, 1.f, stream), "fill_random_bf16", what);
    cuda::check(kernels::fill_random_bf16(v_.data(), elements, 0x0017, 1.f, stream), "fill_random_bf16", what);
    info_.detail = kernel_->detail();
    if (!declined.empty()) info_.detail += cat(info_.detail.empty() ? "" : "; ", "cuDNN SDPA not used: ", declined);
  }

  const void* output() const noexcept override { return o_.data(); }
  std::size_t output_elements() const noexcept override { return o_.bytes() / 2; }

 private:
  static std::string shape() {
    return cat("bf16 forward, batch ", kBatch, ", heads ", kHeads, ", seq ", kSeq, ", head dim ", attention::kHeadDim,
               ", not causal");
  }

  /// cuDNN's SDPA for the check's shape and the timed one; UnavailableError saying why when it cannot run.
  void choose_cudnn() {
    info_.kernel = "cuDNN SDPA";  // names what was tried should loading fail
    info_.description = cat(info_.kernel, ": ", shape());
#if PICKLE_HAVE_CUDNN_FRONTEND
    info_.kernel = attention::cudnn_attention_name();
    info_.description = cat(info_.kernel, ": ", shape(), ", fp32 softmax and accumulation");
    check_kernel_ = attention::make_cudnn_attention(1, kCheckHeads, kCheckSeq);
    kernel_ = attention::make_cudnn_attention(kBatch, kHeads, kSeq);
#else
    throw UnavailableError("cuDNN SDPA: this pickle was built without cuDNN's frontend headers "
                           "(scripts/fetch-cudnn-frontend.sh puts them in .deps/cudnn-frontend; then rebuild)");
#endif
  }

  void choose_own() {
    info_.kernel = "pickle fused attention (own kernel)";
    info_.description = cat(info_.kernel, ": ", shape(), ", mma.sync tensor cores, fp32 accumulation, online softmax");
    check_kernel_ = attention::make_own_attention(1, kCheckHeads, kCheckSeq);
    kernel_ = attention::make_own_attention(kBatch, kHeads, kSeq);
  }

  void check_against_reference(cudaStream_t stream, const Deadline& deadline) {
    const std::string what = "foreground attention: check against the reference kernel";
    const std::size_t elements = static_cast<std::size_t>(kCheckHeads) * kCheckSeq * attention::kHeadDim;
    cuda::DeviceBuffer q(elements * 2, what), k(elements * 2, what), v(elements * 2, what), o(elements * 2, what);
    cuda::DeviceBuffer reference(elements * sizeof(float), what);
    cuda::check(kernels::fill_random_bf16(q.data(), elements, 0x1001, kCheckQueryScale, stream), "fill_random_bf16",
                what);
    cuda::check(kernels::fill_random_bf16(k.data(), elements, 0x1002, 1.f, stream), "fill_random_bf16", what);
    cuda::check(kernels::fill_random_bf16(v.data(), elements, 0x1003, 1.f, stream), "fill_random_bf16", what);
    check_kernel_->launch(q.data(), k.data(), v.data(), o.data(), stream);
    cuda::check(attention::launch_reference(q.data(), k.data(), v.data(), reference.as<float>(), kCheckHeads,
                                            kCheckSeq, stream),
                "launch_reference", what);
    std::vector<std::uint16_t> fused(elements);
    std::vector<float> expected(elements);
    cuda::check(cudaMemcpyAsync(fused.data(), o.data(), elements * 2, cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync", what);
    cuda::check(cudaMemcpyAsync(expected.data(), reference.data(), elements * sizeof(float), cudaMemcpyDeviceToHost,
                                stream),
                "cudaMemcpyAsync", what);
    cuda::wait_stream(stream, deadline, what);
    check_kernel_.reset();  // its workspace is not needed any more
    double worst = 0, magnitude = 0;
    for (std::size_t i = 0; i < elements; ++i) {
      const double got = bf16_to_float(fused[i]), want = expected[i];
      const double error = std::fabs(got - want);
      worst = std::isnan(error) ? HUGE_VAL : std::max(worst, error);
      magnitude = std::max(magnitude, std::fabs(want));
    }
    info_.verify_error = worst;
    info_.verify_tolerance = kTolerance;
    info_.verify_shape = cat("heads ", kCheckHeads, ", seq ", kCheckSeq, ", queries x", kCheckQueryScale,
                             " (max |O| ", cat(std::round(magnitude * 1000) / 1000), ")");
    if (!(magnitude >= kMinReferenceMagnitude)) {
      throw Error(ErrorCode::Internal, cat(what, ": the reference output is nearly zero (max |O| = ", magnitude,
                                           "): the check cannot tell right from wrong"));
    }
    if (!(worst <= kTolerance)) {
      throw Error(ErrorCode::Internal,
                  cat(what, ": max abs error ", worst, " > tolerance ", kTolerance, " (heads ", kCheckHeads, ", seq ",
                      kCheckSeq, ")"));
    }
  }

  AttentionImpl impl_;
  std::unique_ptr<attention::AttentionKernel> check_kernel_, kernel_;
  cuda::DeviceBuffer q_, k_, v_, o_;
};

}  // namespace

std::unique_ptr<Foreground> make_attention_foreground(AttentionImpl impl) {
  return std::make_unique<AttentionForeground>(impl);
}

}  // namespace pickle::bench
