#pragma once
// How a probe fails on a CUDA error: the probe's name, what it was doing and CUDA's word for it on stderr, then exit
// 1 (a probe measures; there is nothing to recover); and the driver's stream memory operations, which the probes
// reach through the runtime. C++17: some probes are CUDA sources.
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>  // program_invocation_short_name (glibc)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace probe {

inline void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, cudaGetErrorString(status));
  std::exit(1);
}

/// Driver calls: the numeric CUresult (cuGetErrorName would tie every probe to libcuda).
inline void check(CUresult status, const char* what) {
  if (status == CUDA_SUCCESS) return;
  std::fprintf(stderr, "%s: %s: CUresult %d\n", program_invocation_short_name, what, static_cast<int>(status));
  std::exit(1);
}

/// cuStreamWaitValue32 and cuStreamWriteValue32 share this signature.
using StreamValueOp = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);

/// The driver entry point `name` ("cuStreamWaitValue32", "cuStreamWriteValue32") through the runtime, so that the
/// probe needs no link to libcuda; exits as check() does when it is missing.
inline StreamValueOp stream_value_op(const char* name) {
  StreamValueOp op = nullptr;
  cudaDriverEntryPointQueryResult found;
  check(cudaGetDriverEntryPointByVersion(name, reinterpret_cast<void**>(&op), 12000, cudaEnableDefault, &found), name);
  return op;
}

/// The number of GPUs, or 0 after saying on stdout that the probe needs `needed` (a machine without enough GPUs has
/// nothing to measure: the probe then exits 0).
inline int gpus_at_least(int needed) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;  // no driver or no GPU
  if (n >= needed) return n;
  std::printf("%s: needs at least %d GPUs (found %d)\n", program_invocation_short_name, needed, n);
  return 0;
}

/// Milliseconds between two events of one device.
inline float elapsed_ms(cudaEvent_t start, cudaEvent_t stop) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return ms;
}

/// A gate: a host word, 0 until the probe stores 1, that streams of any GPU wait for (cuStreamWaitValue32 GEQ 1), so
/// that everything is queued before anything runs.
inline unsigned* mapped_gate() {
  unsigned* gate = nullptr;
  check(cudaHostAlloc(&gate, sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
  *gate = 0;
  return gate;
}

/// The end of a gated measurement: records `stop` on `stream`, opens `gate` (the mapped host word every timed stream
/// waits for, so that enqueueing is not timed), waits for `stop`, and returns the milliseconds from `start`.
inline float open_gate_and_time(unsigned* gate, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop) {
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return ms;
}

/// The median of `samples` (sorted in place; at least one).
inline float median(std::vector<float>& samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace probe
