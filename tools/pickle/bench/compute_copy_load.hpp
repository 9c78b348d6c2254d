#pragma once
// `pickle bench compute --copy-load GBPS`: device-to-device copies inside the foreground's GPU, paced to a rate, on a
// stream and a thread of their own while the foreground is timed: what such local copies (an out-of-place
// collective's own block, say) cost a kernel beside them, and what the kernel leaves them. It was meant as the one-GPU
// stand-in for traffic that other GPUs write into this one, but on H200s these copies behave like SM work: beside the
// attention foreground they reach 19-20 GB/s whatever the rate asked (docs/results/2026-11-28k-h200.md), where a copy
// engine would not be held back. The rate reached is reported beside the rate asked. CUDA builds only.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>

#include "compute_options.hpp"
#include "interference_cuda.hpp"

namespace pickle::bench {

class CopyLoad {
 public:
  static constexpr std::size_t kChunkBytes = kCopyLoadChunkBytes;
  /// Copies enqueued and not yet complete at most: the load never queues up behind copies slower than the rate.
  static constexpr std::size_t kMaxInFlight = 2;

  /// Allocates a source and a destination of kChunkBytes on `device` (the current device). `gbps`: the rate asked
  /// for (1e9 bytes per second); the copies' own rate where they are slower.
  CopyLoad(int device, double gbps);
  CopyLoad(const CopyLoad&) = delete;
  CopyLoad& operator=(const CopyLoad&) = delete;
  ~CopyLoad();

  /// Starts copying (a thread enqueues a copy every kChunkBytes / gbps seconds).
  void start();
  /// Stops, waits for the copies enqueued, and returns the rate reached since start() in GB/s (bytes copied over the
  /// time from start() until the last copy completed). Rethrows the pacing thread's CUDA error.
  double stop();

 private:
  void pace();
  /// One copy of kChunkBytes on the load's stream.
  void enqueue_copy(const std::string& what);
  /// After stop(): the destination holds the source's bytes (an Error saying how many differ otherwise).
  void check_destination() const;

  static constexpr unsigned char kSourceByte = 0x5a;

  int device_;
  double gbps_;
  cuda::DeviceBuffer source_, destination_;
  cuda::StreamHandle stream_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::exception_ptr failure_;
  std::uint64_t copies_ = 0;
  std::int64_t started_ns_ = 0;
};

}  // namespace pickle::bench
