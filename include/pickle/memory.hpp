#pragma once
/// Where a buffer lives. Every transport and collective in pickle runs unchanged on either kind: Cuda on GPU machines,
/// Host on CPU-only machines (CI), where host memory stands in for device memory.

#include <string_view>

namespace pickle {

/// The kind of memory a buffer (and the stream that moves it) belongs to.
enum class MemoryKind {
  Host,  ///< memfd-backed shared host memory, exportable to another process on the same host
  Cuda,  ///< GPU memory (cudaMalloc or the CUDA virtual memory management API)
};

/// "host" or "cuda".
constexpr std::string_view memory_kind_name(MemoryKind kind) noexcept {
  return kind == MemoryKind::Host ? std::string_view("host") : std::string_view("cuda");
}

}  // namespace pickle
