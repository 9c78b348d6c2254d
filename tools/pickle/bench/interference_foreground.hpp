#pragma once
// The foreground of `pickle bench interference`: a compute kernel that runs on rank 1's GPU, alone and while the
// background moves data into that GPU. A Foreground sets itself up (inputs, a check of its arithmetic against a
// simple reference), enqueues iterations on a stream, and keeps its first result, so that every later run can be
// compared with it bit for bit (the same inputs give the same output, traffic or not).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include <cuda_runtime_api.h>

#include "core/clock.hpp"
#include "foreground_options.hpp"
#include "gpu_telemetry.hpp"
#include "interference_cuda.hpp"
#include "interference_report.hpp"

namespace pickle::bench {

class Foreground {
 public:
  virtual ~Foreground() = default;
  Foreground(const Foreground&) = delete;
  Foreground& operator=(const Foreground&) = delete;

  /// Allocates and fills the inputs, checks the arithmetic (info().verify_*) and keeps the first result. Throws
  /// UnavailableError when a library is missing and an Error when the check fails; info() says what it found either
  /// way. The device must be current.
  void setup(cudaStream_t stream, const Deadline& deadline);
  /// Enqueues `iterations` iterations on `stream`.
  virtual void enqueue(cudaStream_t stream, int iterations) = 0;
  /// Output elements (16-bit) that differ from the first result; waits for the stream (bounded by `deadline`).
  std::uint64_t count_changed(cudaStream_t stream, const Deadline& deadline);

  const ForegroundInfo& info() const noexcept { return info_; }

 protected:
  Foreground() = default;
  /// The kernel's own set-up and check (filling info_); the output buffer must hold a result afterwards or after
  /// one enqueue.
  virtual void prepare(cudaStream_t stream, const Deadline& deadline) = 0;
  /// The output: `output_elements()` 16-bit values.
  virtual const void* output() const noexcept = 0;
  virtual std::size_t output_elements() const noexcept = 0;

  ForegroundInfo info_;

 private:
  cuda::DeviceBuffer reference_;  // the first result
  cuda::DeviceBuffer counter_;    // one unsigned long long
};

/// The foreground called `name` ("gemm", "attention"; `attention` picks the attention's implementation);
/// constructing one does nothing that can fail.
std::unique_ptr<Foreground> make_foreground(std::string_view name, AttentionImpl attention);
std::unique_ptr<Foreground> make_gemm_foreground();
std::unique_ptr<Foreground> make_attention_foreground(AttentionImpl attention);

/// Sets `foreground` up (Foreground::setup) and returns its info with the outcome: ok, or unavailable (an
/// UnavailableError: a library or the hardware is missing) or failed, with the reason in detail. The foreground's own
/// errors are reported, not thrown.
ForegroundInfo set_up_foreground(Foreground& foreground, cudaStream_t stream, const Deadline& deadline);

/// One timed measurement: ms per iteration (CUDA events around the timed iterations) and the host's monotonic clock
/// just before they were enqueued and just after the stop event completed (so [start_ns, end_ns] contains the GPU's
/// window).
struct ForegroundTiming {
  double ms_per_iteration = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  std::optional<TelemetrySummary> telemetry;  ///< the GPU's clock and power over the timed iterations, when sampled
};

/// Runs `warmup` iterations, and more until at least `warmup_seconds` passed (so that the GPU reaches the clocks it
/// keeps under sustained load), waits for them, then times `iterations`. Waits are bounded by `deadline`. With
/// `telemetry`, samples the GPU over the timed iterations.
ForegroundTiming time_foreground(Foreground& foreground, cudaStream_t stream, int warmup, double warmup_seconds,
                                 int iterations, const Deadline& deadline, GpuTelemetry* telemetry = nullptr);

}  // namespace pickle::bench
