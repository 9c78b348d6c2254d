#include "compute_gpu.hpp"

#include <exception>
#include <memory>

#include <cuda_runtime_api.h>

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
          for (int repeat = 0; repeat < o.repeats; ++repeat) {
            const bool first = repeat == 0;
            const ForegroundTiming timing = time_foreground(*foreground, stream.get(), first ? o.warmup : 0,
                                                            first ? o.warmup_ms / 1e3 : 0, o.iterations, deadline(),
                                                            telemetry.get());
            result.ms.push_back(timing.ms_per_iteration);
            if (timing.telemetry) {
              result.telemetry = merge(result.telemetry.value_or(TelemetrySummary{}), *timing.telemetry);
            }
          }
          result.changed = foreground->count_changed(stream.get(), deadline());
        } catch (const std::exception& e) {
          result.ms.clear();
          result.changed.reset();
          result.error = plain_message(e);
        }
      }
    }
    report.results.push_back(std::move(result));
  }
}

}  // namespace pickle::bench
