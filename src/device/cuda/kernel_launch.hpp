#pragma once
// Kernel launches through the driver, for pickle's own kernels (the collectives' reduction and LL kernels). C++17
// and no pickle headers: the kernels' sources (nvcc, C++17) include it.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace pickle::device::cuda {

/// Launches `kernel` (the address of a __global__ function of this binary) on `ctas` CTAs of `threads` threads on
/// `stream`, with `args` as cuLaunchKernel and cudaLaunchKernel take them (a pointer to each parameter, in order, of
/// exactly its type). The launch's device must be current. First through the driver: cuLaunchKernel on the
/// CUfunction that cudaGetFuncBySymbol gives for the current context, looked up once per thread, context and kernel
/// (a cache per thread: rank threads take no lock per launch). The runtime's launch finds that handle again at every
/// launch: on H200 hosts the driver's took 0.3-0.45 us less host time per launch (3.0-4.5 us in all;
/// tools/probes/launch_param_probe, docs/results/2026-12-01-h200x2.md), of the 8-10 us that a small allreduce costs
/// its host. Where that launches nothing (no entry point, no context bound to this thread yet, no handle, or the
/// launch failed), through the runtime (cudaLaunchKernel, which binds the device's primary context), whose error it
/// returns (cleared as cudaGetLastError clears it), so that failures read as they did. A context destroyed and made
/// again at the same address (cudaDeviceReset while pickle's kernels are in use, which pickle does not support) would
/// find a stale handle.
cudaError_t launch_kernel(const void* kernel, int ctas, int threads, cudaStream_t stream, void** args);

/// The launches of launch_kernel in this process that went through the driver: a test sees that the faster path is
/// the one taken.
std::uint64_t kernel_launches_through_driver();

}  // namespace pickle::device::cuda
