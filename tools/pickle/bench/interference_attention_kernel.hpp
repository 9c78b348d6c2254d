#pragma once
// One implementation of the attention foreground's forward pass O = softmax(Q K^T / sqrt(128)) V, set up for one
// shape: pickle's own fused kernel (interference_attention.cu) or cuDNN's SDPA (interference_attention_cudnn.cpp).
// Tensors are [batch][heads][seq][128] bf16, contiguous; not causal.

#include <memory>
#include <string>

#include <cuda_runtime_api.h>

namespace pickle::bench::attention {

class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;
  AttentionKernel(const AttentionKernel&) = delete;
  AttentionKernel& operator=(const AttentionKernel&) = delete;

  /// Enqueues one forward pass on `stream`; an Error naming the call when it cannot be enqueued.
  virtual void launch(const void* q, const void* k, const void* v, void* o, cudaStream_t stream) = 0;
  /// What the implementation chose for this shape (cuDNN's engine and workspace); "" when there is no choice.
  virtual std::string detail() const { return {}; }

 protected:
  AttentionKernel() = default;
};

/// pickle's fused kernel for `batch` x `heads` slices of `seq` rows (seq a multiple of kTile).
std::unique_ptr<AttentionKernel> make_own_attention(int batch, int heads, int seq);

#if PICKLE_HAVE_CUDNN_FRONTEND
/// "cuDNN SDPA (cudnn 9.19.0, frontend 1.32.0)": loads libcudnn.so.9 (UnavailableError when it cannot).
std::string cudnn_attention_name();
/// cuDNN's SDPA through its graph API for this shape on the current device: the graph is validated, lowered, and
/// the first engine of heuristic A that supports it is built, with its workspace. UnavailableError when
/// libcudnn.so.9 (or the CUDA runtime it needs) cannot be loaded or no engine supports the graph; Error otherwise.
std::unique_ptr<AttentionKernel> make_cudnn_attention(int batch, int heads, int seq);
#endif

}  // namespace pickle::bench::attention
