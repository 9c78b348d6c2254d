#include "gpu_telemetry.hpp"

#include <pickle/error.hpp>

namespace pickle::bench {

TelemetrySummary summarize(std::span<const TelemetrySample> samples) {
  TelemetrySummary out;
  if (samples.empty()) return out;
  double mhz = 0, mw = 0, capped = 0, thermal = 0, hw = 0;
  for (const TelemetrySample& s : samples) {
    mhz += s.sm_mhz;
    mw += s.power_mw;
    capped += (s.reasons & clock_reason::kSwPowerCap) != 0 ? 1 : 0;
    thermal += (s.reasons & (clock_reason::kSwThermal | clock_reason::kHwThermal)) != 0 ? 1 : 0;
    hw += (s.reasons & (clock_reason::kHwSlowdown | clock_reason::kHwPowerBrake)) != 0 ? 1 : 0;
  }
  const double n = static_cast<double>(samples.size());
  out.samples = static_cast<int>(samples.size());
  out.sm_mhz = mhz / n;
  out.power_w = mw / n / 1000.0;
  out.power_capped = capped / n;
  out.thermal = thermal / n;
  out.hw_slowdown = hw / n;
  return out;
}

TelemetrySummary merge(const TelemetrySummary& a, const TelemetrySummary& b) {
  const int n = a.samples + b.samples;
  if (n == 0) return {};
  const double wa = static_cast<double>(a.samples) / n, wb = static_cast<double>(b.samples) / n;
  return {.samples = n,
          .sm_mhz = a.sm_mhz * wa + b.sm_mhz * wb,
          .power_w = a.power_w * wa + b.power_w * wb,
          .power_capped = a.power_capped * wa + b.power_capped * wb,
          .thermal = a.thermal * wa + b.thermal * wb,
          .hw_slowdown = a.hw_slowdown * wa + b.hw_slowdown * wb};
}

json::Value telemetry_to_json(const TelemetrySummary& summary) {
  json::Value out = json::Value::object();
  out["samples"] = summary.samples;
  out["sm_mhz"] = summary.sm_mhz;
  out["power_w"] = summary.power_w;
  out["power_capped"] = summary.power_capped;
  out["thermal"] = summary.thermal;
  out["hw_slowdown"] = summary.hw_slowdown;
  return out;
}

TelemetrySummary telemetry_from_json(const json::Value& value) {
  auto number = [&](const char* key) {
    if (!value.is_object() || !value.contains(key) || !value.at(key).is_number()) {
      throw ProtocolError(std::string("GPU telemetry: '") + key + "' is missing or not a number");
    }
    return value.at(key).as_double();
  };
  return {.samples = static_cast<int>(number("samples")),
          .sm_mhz = number("sm_mhz"),
          .power_w = number("power_w"),
          .power_capped = number("power_capped"),
          .thermal = number("thermal"),
          .hw_slowdown = number("hw_slowdown")};
}

}  // namespace pickle::bench
