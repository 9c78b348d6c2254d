// "pickle fused attention (own kernel)" (interference_attention.cu) as an AttentionKernel: batch and heads are one
// dimension to the kernel, since every (batch, head) slice is independent and contiguous.
#include <string>

#include "core/format.hpp"
#include "interference_attention.hpp"
#include "interference_attention_kernel.hpp"
#include "interference_cuda.hpp"

namespace pickle::bench::attention {
namespace {

class OwnAttention final : public AttentionKernel {
 public:
  OwnAttention(int batch, int heads, int seq)
      : slices_(batch * heads), seq_(seq), what_(cat("pickle fused attention, ", slices_, " heads, seq ", seq)) {
    cuda::check(prepare_fused(), "cudaFuncSetAttribute", "pickle fused attention: set-up");
  }

  void launch(const void* q, const void* k, const void* v, void* o, cudaStream_t stream) override {
    cuda::check(launch_fused(q, k, v, o, slices_, seq_, stream), "launch_fused", what_);
  }

 private:
  int slices_, seq_;
  std::string what_;
};

}  // namespace

std::unique_ptr<AttentionKernel> make_own_attention(int batch, int heads, int seq) {
  return std::make_unique<OwnAttention>(batch, heads, seq);
}

}  // namespace pickle::bench::attention
