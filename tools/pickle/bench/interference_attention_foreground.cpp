// The attention foreground: "pickle fused attention (own kernel)" (interference_attention.cu) on the seed's shape,
// batch 8, heads 64, seq 4096, head dim 128, bf16, not causal. Before it is timed, the kernel runs on a small shape
// beside the simple reference kernel, with queries scaled up so that the softmax is far from uniform (a near-uniform
// softmax averages the values and would hide a wrong key order), and the largest difference must stay within the
// stated tolerance.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "interference_attention.hpp"
#include "interference_foreground.hpp"
#include "interference_kernels.hpp"

namespace pickle::bench {
namespace {

constexpr int kBatch = 8, kHeads = 64, kSeq = 4096;
constexpr int kCheckHeads = 4, kCheckSeq = 512;
constexpr float kCheckQueryScale = 8.f;
/// bf16 rounding of P (2^-9 relative per weight) and of O (2^-9 of |O| <= 1) keep a right kernel near 3e-3; a wrong
/// fragment layout or key order is off by 1e-1 or more.
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
  void enqueue(cudaStream_t stream, int iterations) override {
    for (int i = 0; i < iterations; ++i) {
      cuda::check(attention::launch_fused(q_.data(), k_.data(), v_.data(), o_.data(), kBatch * kHeads, kSeq, stream),
                  "launch_fused", "foreground attention");
    }
  }

 protected:
  void prepare(cudaStream_t stream, const Deadline& deadline) override {
    info_.name = "attention";
    info_.description = cat("pickle fused attention (own kernel): bf16 forward, batch ", kBatch, ", heads ", kHeads,
                            ", seq ", kSeq, ", head dim ", attention::kHeadDim,
                            ", mma.sync tensor cores, fp32 accumulation, online softmax");
    // Q K^T and P V: 2 * seq * seq * d each, per head.
    info_.flops = 4.0 * kBatch * kHeads * static_cast<double>(kSeq) * kSeq * attention::kHeadDim;
    cuda::check(attention::prepare_fused(), "cudaFuncSetAttribute", "foreground attention: set-up");
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
  }

  const void* output() const noexcept override { return o_.data(); }
  std::size_t output_elements() const noexcept override { return o_.bytes() / 2; }

 private:
  void check_against_reference(cudaStream_t stream, const Deadline& deadline) {
    const std::string what = "foreground attention: check against the reference kernel";
    const std::size_t elements = static_cast<std::size_t>(kCheckHeads) * kCheckSeq * attention::kHeadDim;
    cuda::DeviceBuffer q(elements * 2, what), k(elements * 2, what), v(elements * 2, what), o(elements * 2, what);
    cuda::DeviceBuffer reference(elements * sizeof(float), what);
    cuda::check(kernels::fill_random_bf16(q.data(), elements, 0x1001, kCheckQueryScale, stream), "fill_random_bf16",
                what);
    cuda::check(kernels::fill_random_bf16(k.data(), elements, 0x1002, 1.f, stream), "fill_random_bf16", what);
    cuda::check(kernels::fill_random_bf16(v.data(), elements, 0x1003, 1.f, stream), "fill_random_bf16", what);
    cuda::check(attention::launch_fused(q.data(), k.data(), v.data(), o.data(), kCheckHeads, kCheckSeq, stream),
                "launch_fused", what);
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

  cuda::DeviceBuffer q_, k_, v_, o_;
};

}  // namespace

std::unique_ptr<Foreground> make_attention_foreground() { return std::make_unique<AttentionForeground>(); }

}  // namespace pickle::bench
