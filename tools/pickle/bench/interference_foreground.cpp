#include "interference_foreground.hpp"

#include <algorithm>
#include <cmath>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "interference_kernels.hpp"
#include "lockstep.hpp"

namespace pickle::bench {

std::unique_ptr<Foreground> make_foreground(std::string_view name, AttentionImpl attention) {
  if (name == "gemm") return make_gemm_foreground();
  if (name == "attention") return make_attention_foreground(attention);
  throw InvalidArgument(cat("bench interference: unknown foreground '", name, "'"));
}

void Foreground::setup(cudaStream_t stream, const Deadline& deadline) {
  prepare(stream, deadline);
  const std::string what = cat("foreground ", info_.name, ": keeping the first result");
  enqueue(stream, 1);
  const std::size_t bytes = output_elements() * 2;
  reference_ = cuda::DeviceBuffer(bytes, what);
  counter_ = cuda::DeviceBuffer(sizeof(unsigned long long), what);
  cuda::check(cudaMemcpyAsync(reference_.data(), output(), bytes, cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync", what);
  cuda::wait_stream(stream, deadline, what);
}

ForegroundInfo set_up_foreground(Foreground& foreground, cudaStream_t stream, const Deadline& deadline) {
  try {
    foreground.setup(stream, deadline);
    return foreground.info();
  } catch (const std::exception& e) {
    ForegroundInfo info = foreground.info();
    const auto* error = dynamic_cast<const Error*>(&e);
    info.status = error != nullptr && error->code() == ErrorCode::Unavailable ? RunStatus::Unavailable
                                                                              : RunStatus::Failed;
    info.detail = plain_message(e);
    return info;
  }
}

std::uint64_t Foreground::count_changed(cudaStream_t stream, const Deadline& deadline) {
  const std::string what = cat("foreground ", info_.name, ": comparing with the first result");
  cuda::check(cudaMemsetAsync(counter_.data(), 0, sizeof(unsigned long long), stream), "cudaMemsetAsync", what);
  cuda::check(kernels::count_differences_u16(output(), reference_.data(), output_elements(),
                                             counter_.as<unsigned long long>(), stream),
              "count_differences_u16", what);
  unsigned long long changed = 0;
  cuda::check(cudaMemcpyAsync(&changed, counter_.data(), sizeof changed, cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync", what);
  cuda::wait_stream(stream, deadline, what);
  return changed;
}

ForegroundTiming time_foreground(Foreground& foreground, cudaStream_t stream, int warmup, double warmup_seconds,
                                 int iterations, const Deadline& deadline, GpuTelemetry* telemetry) {
  const std::string what = cat("foreground ", foreground.info().name, ": timing ", iterations, " iterations");
  Stopwatch watch;
  int first = warmup > 0 ? warmup : (warmup_seconds > 0 ? 1 : 0);
  if (first > 0) {
    foreground.enqueue(stream, first);
    cuda::wait_stream(stream, deadline, what);
  }
  const double elapsed = watch.seconds();
  if (first > 0 && elapsed < warmup_seconds) {
    // The rest in one batch, sized from the first: no gap in which the GPU could cool down.
    const double per_iteration = elapsed / first;
    const double more = per_iteration > 0 ? std::ceil((warmup_seconds - elapsed) / per_iteration) : 1.0;
    foreground.enqueue(stream, static_cast<int>(std::min(more, 1e6)));
    cuda::wait_stream(stream, deadline, what);
  }
  cuda::EventHandle start(true, what), stop(true, what);
  ForegroundTiming timing;
  if (telemetry != nullptr) telemetry->start();
  timing.start_ns = now_ns();  // the stream is idle: nothing timed below can start before this
  cuda::check(cudaEventRecord(start.get(), stream), "cudaEventRecord", what);
  foreground.enqueue(stream, iterations);
  cuda::check(cudaEventRecord(stop.get(), stream), "cudaEventRecord", what);
  cuda::wait_event(stop.get(), deadline, what);
  timing.end_ns = now_ns();
  if (telemetry != nullptr) timing.telemetry = telemetry->stop();
  float ms = 0;
  cuda::check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime", what);
  timing.ms_per_iteration = static_cast<double>(ms) / iterations;
  return timing;
}

}  // namespace pickle::bench
