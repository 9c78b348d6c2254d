#pragma once
// Makes one GPU current on the calling thread, as every rank must before NCCL (which uses the current device) or
// any other CUDA work: rank r of a host uses GPU r.

namespace pickle::bench {

/// cudaSetDevice(device): binds the device's primary context to this thread, for pickle's device layer and for
/// NCCL alike (each has its own CUDA runtime; they meet in the driver's current context). CudaError on failure,
/// UnavailableError in a build without CUDA.
void bind_cuda_device(int device);

}  // namespace pickle::bench
