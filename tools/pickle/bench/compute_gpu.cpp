#include "compute_gpu.hpp"

#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include <cuda_runtime_api.h>

#include "compute_copy_load.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "cuda_device.hpp"
#include "device/backends.hpp"
#include "gpu_telemetry.hpp"
#include "interference_cuda.hpp"
#include "interference_foreground.hpp"
#include "lockstep.hpp"

namespace pickle::bench {
namespace {

/// With --copy-load, the foreground runs this long untimed after the load starts or stops, so that the clocks have
/// settled to the new power draw before a repeat is timed.
constexpr double kSettleSeconds = 0.2;

struct Repeats {
  std::vector<double>& ms;
  std::optional<TelemetrySummary>& telemetry;
};

/// Times `count` repeats into `into`, the first after `warmup` iterations and at least `warmup_seconds`.
void time_repeats(Foreground& foreground, cudaStream_t stream, int count, int warmup, double warmup_seconds,
                  int iterations, GpuTelemetry* telemetry, Repeats into) {
  for (int repeat = 0; repeat < count; ++repeat) {
    const bool first = repeat == 0;
    const ForegroundTiming timing =
        time_foreground(foreground, stream, first ? warmup : 0, first ? warmup_seconds : 0, iterations,
                        Deadline::after_seconds(env::timeout_seconds()), telemetry);
    into.ms.push_back(timing.ms_per_iteration);
    if (timing.telemetry) into.telemetry = merge(into.telemetry.value_or(TelemetrySummary{}), *timing.telemetry);
  }
}

/// One foreground's repeats: alone, or (--copy-load) half alone, all under the copy load, the other half alone.
void measure_one(ComputeResult& result, Foreground& foreground, cudaStream_t stream, const ComputeOptions& o,
                 GpuTelemetry* telemetry, CopyLoad* load) {
  const Repeats alone{result.ms, result.telemetry};
  const double warmup_seconds = o.warmup_ms / 1e3;
  if (load == nullptr) {
    time_repeats(foreground, stream, o.repeats, o.warmup, warmup_seconds, o.iterations, telemetry, alone);
    return;
  }
  const int before = (o.repeats + 1) / 2;
  time_repeats(foreground, stream, before, o.warmup, warmup_seconds, o.iterations, telemetry, alone);
  result.loaded.emplace();
  load->start();
  try {
    time_repeats(foreground, stream, o.repeats, 1, kSettleSeconds, o.iterations, telemetry,
                 {result.loaded->ms, result.loaded->telemetry});
  } catch (...) {
    try {
      load->stop();
    } catch (...) {  // the foreground's error is the one to report
    }
    throw;
  }
  result.loaded->copy_gbps = load->stop();
  time_repeats(foreground, stream, o.repeats - before, 1, kSettleSeconds, o.iterations, telemetry, alone);
}

}  // namespace

void measure_compute(ComputeReport& report) {
  const ComputeOptions& o = report.options;
  bind_cuda_device(o.device);
  cudaDeviceProp properties{};
  cuda::check(cudaGetDeviceProperties(&properties, o.device), "cudaGetDeviceProperties", "bench compute");
  report.device_name = properties.name;
  cuda::StreamHandle stream("bench compute stream");
  std::string why_not;
  std::unique_ptr<GpuTelemetry> telemetry = GpuTelemetry::open(device::cuda_pci_bus_id(o.device), why_not);
  report.telemetry_source = telemetry ? telemetry->describe() : cat("not sampled: ", why_not);
  std::optional<CopyLoad> load;
  if (o.copy_load_gbps > 0) load.emplace(o.device, o.copy_load_gbps);
  const double timeout_seconds = env::timeout_seconds();
  auto deadline = [&] { return Deadline::after_seconds(timeout_seconds); };
  for (const auto& name : o.foregrounds) {
    ComputeResult result;
    {
      // Scoped: each foreground frees its buffers before the next one allocates.
      std::unique_ptr<Foreground> foreground = make_foreground(name, o.attention);
      result.info = set_up_foreground(*foreground, stream.get(), deadline());
      result.info.name = name;
      if (result.info.status == RunStatus::Ok) {
        try {
          measure_one(result, *foreground, stream.get(), o, telemetry.get(), load ? &*load : nullptr);
          // Under the copy load too, the same inputs must give the same bits.
          result.changed = foreground->count_changed(stream.get(), deadline());
        } catch (const std::exception& e) {
          result.ms.clear();
          result.telemetry.reset();
          result.loaded.reset();
          result.changed.reset();
          result.error = plain_message(e);
        }
      }
    }
    report.results.push_back(std::move(result));
  }
}

}  // namespace pickle::bench
