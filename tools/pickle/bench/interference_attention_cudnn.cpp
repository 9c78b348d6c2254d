// cuDNN's SDPA as the attention foreground's kernel, through NVIDIA's header-only cuDNN frontend in its dynamic
// loading mode: nothing links cuDNN, the frontend dlsym's every backend call from cudnn_frontend::cudnn_dlhandle
// (set from cudnn_library() before the first call) and opens libcudart itself for the few runtime calls it makes.
// The only file that includes the frontend: its headers are large, and one translation unit keeps the build short.
#include <cmath>
#include <cstdint>
#include <exception>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "cudnn_library.hpp"
#include "interference_attention.hpp"
#include "interference_attention_kernel.hpp"
#include "interference_cuda.hpp"

namespace cudnn_frontend {
/// The frontend's handle to libcudnn.so.9 (declared by cudnn_frontend_shim.h under
/// NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING; defined by its user, once).
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace pickle::bench::attention {
namespace {

namespace fe = cudnn_frontend;

/// The tensors' ids in the graph and the variant pack.
constexpr std::int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4;

const CudnnLibrary& load_cudnn() {
  const CudnnLibrary& library = cudnn_library();
  fe::cudnn_dlhandle = library.handle;
  return library;
}

std::string frontend_version() {
  return cat(CUDNN_FRONTEND_MAJOR_VERSION, ".", CUDNN_FRONTEND_MINOR_VERSION, ".", CUDNN_FRONTEND_PATCH_VERSION);
}

class CudnnAttention final : public AttentionKernel {
 public:
  CudnnAttention(int batch, int heads, int seq)
      : what_(cat("cuDNN SDPA (cudnn ", load_cudnn().version, "), batch ", batch, ", heads ", heads, ", seq ", seq)) {
    if (cudnnStatus_t status = fe::detail::create_handle(&handle_.handle); status != CUDNN_STATUS_SUCCESS) {
      // cuDNN cannot use this GPU or driver (e.g. CUDNN_STATUS_NOT_INITIALIZED, ..._ARCH_MISMATCH).
      throw UnavailableError(cat(what_, ": cudnnCreate returned ", describe(status)));
    }
    graph_ = std::make_shared<fe::graph::Graph>();
    graph_->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    // A contiguous [batch][heads][seq][head dim] tensor: the layout of the own kernel's inputs, so that both run on
    // the same buffers.
    const std::int64_t s = seq, d = kHeadDim;
    const std::vector<std::int64_t> dims = {batch, heads, s, d}, strides = {heads * s * d, s * d, d, 1};
    auto input = [&](const char* name, std::int64_t uid) {
      return graph_->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(
          strides));
    };
    // Inference: no softmax statistics (they are only needed by a backward pass).
    auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale(
        1.f / std::sqrt(static_cast<float>(kHeadDim)));
    auto outputs = graph_->sdpa(input("Q", kUidQ), input("K", kUidK), input("V", kUidV), options);
    outputs[0]->set_output(true).set_uid(kUidO).set_dim(dims).set_stride(strides);

    require(graph_->validate(), "validate");
    require(graph_->build_operation_graph(handle_.handle), "build_operation_graph");
    require(graph_->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans(heuristic A)");
    require(graph_->check_support(), "check_support");
    require(graph_->build_plans(), "build_plans");
    std::int64_t bytes = 0;
    require(graph_->get_workspace_size(bytes), "get_workspace_size");
    if (bytes > 0) workspace_ = cuda::DeviceBuffer(static_cast<std::size_t>(bytes), cat(what_, ": workspace"));
    std::string plan;
    if (graph_->get_plan_name(plan).is_good()) detail_ = cat("engine ", plan, ", ");
    detail_ += cat("workspace ", human_bytes(static_cast<std::uint64_t>(bytes)));
  }

  void launch(const void* q, const void* k, const void* v, void* o, cudaStream_t stream) override {
    check(fe::detail::set_stream(handle_.handle, stream), "cudnnSetStream");
    // The frontend takes the pack by non-const reference but only reads it; Q, K and V are only read by cuDNN.
    std::unordered_map<std::int64_t, void*> pack = {
        {kUidQ, const_cast<void*>(q)}, {kUidK, const_cast<void*>(k)}, {kUidV, const_cast<void*>(v)}, {kUidO, o}};
    fe::error_t status;
    try {
      status = graph_->execute(handle_.handle, pack, workspace_.data());
    } catch (const std::exception& e) {
      throw Error(ErrorCode::Cuda, cat(what_, ": execute threw: ", e.what()));
    }
    if (status.is_bad()) throw Error(ErrorCode::Cuda, cat(what_, ": execute failed: ", status.get_message()));
  }

  std::string detail() const override { return detail_; }

 private:
  static std::string describe(cudnnStatus_t status) {
    const char* name = fe::detail::get_error_string(status);
    return cat(static_cast<int>(status), " (", name != nullptr ? name : "unknown cuDNN status", ")");
  }

  void check(cudnnStatus_t status, const char* call) const {
    if (status == CUDNN_STATUS_SUCCESS) return;
    throw Error(ErrorCode::Cuda, cat(what_, ": ", call, " returned ", describe(status)));
  }

  /// A malformed graph is pickle's bug (Internal); any other refusal means cuDNN cannot run it here (this version,
  /// GPU or engine set has no kernel for it, or cuDNN's own CUDA runtime cannot reach the device): UnavailableError,
  /// which --attention auto answers with the own kernel.
  void require(fe::error_t status, const char* step) const {
    if (status.is_good()) return;
    const std::string message = cat(what_, ": ", step, " failed: ", status.get_message());
    switch (status.get_code()) {
      case fe::error_code_t::ATTRIBUTE_NOT_SET:
      case fe::error_code_t::SHAPE_DEDUCTION_FAILED:
      case fe::error_code_t::INVALID_TENSOR_NAME:
      case fe::error_code_t::INVALID_VARIANT_PACK:
      case fe::error_code_t::INVALID_VALUE:
        throw Error(ErrorCode::Internal, message);
      default:
        throw UnavailableError(message);
    }
  }

  /// Destroyed last (declared first), also when the constructor throws after creating it.
  struct Handle {
    cudnnHandle_t handle = nullptr;
    Handle() = default;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() {
      if (handle != nullptr) (void)fe::detail::destroy_handle(handle);
    }
  };

  std::string what_;
  Handle handle_;
  std::shared_ptr<fe::graph::Graph> graph_;
  cuda::DeviceBuffer workspace_;
  std::string detail_;
};

}  // namespace

std::string cudnn_attention_name() {
  return cat("cuDNN SDPA (cudnn ", load_cudnn().version, ", frontend ", frontend_version(), ")");
}

std::unique_ptr<AttentionKernel> make_cudnn_attention(int batch, int heads, int seq) {
  try {
    return std::make_unique<CudnnAttention>(batch, heads, seq);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The frontend throws std::runtime_error when it cannot open libcudart or find a symbol in libcudnn.
    throw UnavailableError(cat("cuDNN SDPA: ", e.what()));
  }
}

}  // namespace pickle::bench::attention
