#pragma once
// What the GPU's clock and power did while a benchmark timed a kernel (NVML, sampled by a thread of its own). A kernel
// that runs slower beside communication may be starved of memory or of its links, or may run at a lower clock because
// the board is at its power limit and the traffic (copy engines, NVLink, HBM) draws from the same budget: the SM clock
// and the power beside each timing tell the two apart. The summary arithmetic and the JSON form are here, free of
// NVML, so that they are tested on machines without a GPU (gpu_telemetry.cpp); the sampler is gpu_telemetry_nvml.cpp.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/json.hpp"

namespace pickle::bench {

/// NVML's clock-event ("throttle") reason bits that the summary counts (nvml.h, nvmlClocksEventReason*).
namespace clock_reason {
constexpr std::uint64_t kSwPowerCap = 0x4;
constexpr std::uint64_t kHwSlowdown = 0x8;
constexpr std::uint64_t kSwThermal = 0x20;
constexpr std::uint64_t kHwThermal = 0x40;
constexpr std::uint64_t kHwPowerBrake = 0x80;
}  // namespace clock_reason

/// One reading.
struct TelemetrySample {
  unsigned sm_mhz = 0;
  unsigned power_mw = 0;
  std::uint64_t reasons = 0;  ///< clock-event reason bits
};

/// A window's readings, summarised.
struct TelemetrySummary {
  int samples = 0;
  double sm_mhz = 0;        ///< mean SM clock
  double power_w = 0;       ///< mean power (NVML's instantaneous GPU power where the driver has it)
  double power_capped = 0;  ///< fraction of the samples held by the software power cap
  double thermal = 0;       ///< fraction slowed for temperature (software or hardware)
  double hw_slowdown = 0;   ///< fraction slowed by the hardware (slowdown signal or power brake)
};

/// The summary of `samples` (all zero when there are none).
TelemetrySummary summarize(std::span<const TelemetrySample> samples);
/// Two windows' summaries as one, weighted by their samples.
TelemetrySummary merge(const TelemetrySummary& a, const TelemetrySummary& b);

/// {"samples", "sm_mhz", "power_w", "power_capped", "thermal", "hw_slowdown"}, and back (ProtocolError when a key is
/// missing or not a number).
json::Value telemetry_to_json(const TelemetrySummary& summary);
TelemetrySummary telemetry_from_json(const json::Value& value);

/// Samples one GPU every kPeriodMs from start() to stop(), on a thread of its own. Not thread-safe: one user.
class GpuTelemetry {
 public:
  static constexpr int kPeriodMs = 5;

  /// The sampler of the GPU at PCI address `bus_id` ("0000:18:00.0"); nullptr with the reason in `why_not` when NVML
  /// is missing, cannot find the GPU, or cannot read its SM clock.
  static std::unique_ptr<GpuTelemetry> open(const std::string& bus_id, std::string& why_not);
  virtual ~GpuTelemetry() = default;

  /// What it reads, for a report's note: "NVML <path>, GPU <bus id>, power limit <W> W, SM clock at most <MHz> MHz".
  virtual std::string describe() const = 0;
  /// Takes a first reading now, then one every kPeriodMs until stop().
  virtual void start() = 0;
  /// Stops and summarises the thread's readings since start(); where it took fewer than two (a window shorter than
  /// about two periods), those with the first reading and one taken now.
  virtual TelemetrySummary stop() = 0;
};

}  // namespace pickle::bench
