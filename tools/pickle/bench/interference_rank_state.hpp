#pragma once
// What one rank of `pickle bench interference` holds for the whole run: its place in the job and the plan, its GPU's
// stream and counter, its foregrounds (ranks that measure) and the background's buffers (ranks that take part).
// CUDA builds only.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>

#include "core/clock.hpp"
#include "device/memory.hpp"
#include "gpu_telemetry.hpp"
#include "interference_cuda.hpp"
#include "interference_foreground.hpp"
#include "interference_options.hpp"
#include "interference_plan.hpp"
#include "lockstep.hpp"

namespace pickle::bench {

struct RankState {
  Store* store = nullptr;
  Lockstep* lockstep = nullptr;
  const InterferenceOptions* options = nullptr;
  InterferencePlan plan;
  int rank = 0;
  int device = 0;        ///< local rank modulo the GPUs (round robin where --share-gpus lets ranks share one)
  int local_world_size = 2;  ///< the job's ranks on this host (a background's ranks on it: at most this many)
  double timeout_seconds = 60;
  std::optional<cuda::StreamHandle> stream;   // ranks taking part: the foreground's and the checks'
  std::optional<cuda::DeviceBuffer> counter;  // one unsigned long long for the counting kernels
  std::vector<std::unique_ptr<Foreground>> foregrounds;  // ranks that measure; null where set-up failed
  std::unique_ptr<GpuTelemetry> telemetry;  // ranks that measure, where NVML can sample their GPU
  std::string telemetry_source;             // what samples it, or why nothing does
  std::unique_ptr<device::Allocation> send, recv;
  std::size_t send_bytes = 0, recv_bytes = 0;

  Deadline deadline() const { return Deadline::after_seconds(timeout_seconds); }
  bool active() const noexcept { return plan.takes_part(rank); }
  void* send_ptr() const noexcept { return send ? send->data() : nullptr; }
  void* recv_ptr() const noexcept { return recv ? recv->data() : nullptr; }
};

}  // namespace pickle::bench
