#pragma once
// The LL form's two memory operations on a flagged line (ll_allreduce.hpp), shared by its kernel
// (ll_allreduce_cuda.cu) and tools/probes/ll_poll_probe, so that the probe measures the kernel's own loads and stores.
// nvcc only.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pickle::coll {

/// One 16-byte store of a flagged line, volatile so that it goes out now rather than sit in a cache (NCCL's LL
/// stores the same way).
inline __device__ void store_flagged(void* cell, std::size_t line, uint2 data, std::uint32_t flag) {
  uint4* at = static_cast<uint4*>(cell) + line;
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(data.x), "r"(flag), "r"(data.y),
               "r"(flag)
               : "memory");
}

inline __device__ uint4 load_flagged(const void* cell, std::size_t line) {
  const uint4* at = static_cast<const uint4*>(cell) + line;
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at)
               : "memory");
  return v;
}

}  // namespace pickle::coll
