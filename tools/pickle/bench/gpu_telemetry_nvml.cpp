// GpuTelemetry over NVML (src/topology/nvml_library.hpp): a thread reads the SM clock, the GPU's power and the
// clock-event reasons every few milliseconds while a kernel is timed.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "gpu_telemetry.hpp"
#include "lockstep.hpp"
#include "topology/nvml_library.hpp"

namespace pickle::bench {
namespace {

namespace nvml = topology::nvml;
constexpr int kClockSm = 1;                 // NVML_CLOCK_SM
constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT

// nvmlFieldValue_t (nvml.h): one field of nvmlDeviceGetFieldValues.
union FieldNumber {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
  unsigned short us;
};
struct FieldValue {
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp;
  long long latency_us;
  int value_type;  // nvmlValueType_t: 0 double, 1 unsigned int, 2 unsigned long, 3 unsigned long long, ...
  nvml::Return result;
  FieldNumber value;
};

/// A field's value as a number; nullopt when NVML did not fill it.
std::optional<double> field_number(const FieldValue& field) {
  if (field.result != nvml::kSuccess) return std::nullopt;
  switch (field.value_type) {
    case 0: return field.value.d;
    case 1: return static_cast<double>(field.value.ui);
    case 2: return static_cast<double>(field.value.ul);
    case 3: return static_cast<double>(field.value.ull);
    case 4: return static_cast<double>(field.value.sll);
    case 5: return static_cast<double>(field.value.si);
    case 6: return static_cast<double>(field.value.us);
    default: return std::nullopt;
  }
}

class NvmlTelemetry final : public GpuTelemetry {
 public:
  NvmlTelemetry(std::unique_ptr<nvml::Library> library, const std::string& bus_id)
      : library_(std::move(library)),
        bus_id_(bus_id),
        device_(library_->device(bus_id)),
        clock_(library_->symbol<nvml::Return(nvml::Device, int, unsigned*)>("nvmlDeviceGetClockInfo")),
        power_(library_->symbol<nvml::Return(nvml::Device, unsigned*)>("nvmlDeviceGetPowerUsage")),
        fields_(library_->find<nvml::Return(nvml::Device, int, FieldValue*)>("nvmlDeviceGetFieldValues")),
        // Renamed in the 535 drivers; the old name stays exported for a while.
        reasons_(library_->find<nvml::Return(nvml::Device, unsigned long long*)>(
            "nvmlDeviceGetCurrentClocksEventReasons")) {
    if (reasons_ == nullptr) {
      reasons_ = library_->find<nvml::Return(nvml::Device, unsigned long long*)>(
          "nvmlDeviceGetCurrentClocksThrottleReasons");
    }
    unsigned mhz = 0;
    if (nvml::Return result = clock_(device_, kClockSm, &mhz); result != nvml::kSuccess) {
      throw UnavailableError(cat("NVML cannot read the SM clock of GPU ", bus_id, ": ", library_->error(result)));
    }
    auto max_clock = library_->find<nvml::Return(nvml::Device, int, unsigned*)>("nvmlDeviceGetMaxClockInfo");
    if (max_clock != nullptr && max_clock(device_, kClockSm, &mhz) == nvml::kSuccess) max_sm_mhz_ = mhz;
    auto limit = library_->find<nvml::Return(nvml::Device, unsigned*)>("nvmlDeviceGetEnforcedPowerLimit");
    unsigned mw = 0;
    if (limit != nullptr && limit(device_, &mw) == nvml::kSuccess) power_limit_w_ = mw / 1000;
    // nvmlDeviceGetPowerUsage averages over about a second from Ampere on, longer than many timed windows: the
    // instantaneous field where the driver has it.
    instant_power_ = instant_power_mw().has_value();
  }

  ~NvmlTelemetry() override { halt(); }

  std::string describe() const override {
    return cat("NVML ", library_->path(), ", GPU ", bus_id_,
               power_limit_w_ > 0 ? cat(", power limit ", power_limit_w_, " W") : std::string(),
               max_sm_mhz_ > 0 ? cat(", SM clock at most ", max_sm_mhz_, " MHz") : std::string(),
               instant_power_ ? ", instantaneous power" : ", power averaged by NVML (about 1 s from Ampere on)",
               reasons_ == nullptr ? ", no clock-event reasons in this driver" : "", ", a reading every ",
               kPeriodMs, " ms");
  }

  void start() override {
    halt();
    samples_.clear();
    stopping_ = false;
    samples_.push_back(read());
    thread_ = std::thread([this] { sample_until_stopped(); });
  }

  /// The readings of the thread alone where it took at least two: the first and last readings are taken while no
  /// timed kernel runs yet or any more, and in a short window they would weigh as much as the rest.
  TelemetrySummary stop() override {
    halt();
    if (samples_.size() >= 3) return summarize(std::span(samples_).subspan(1));
    samples_.push_back(read());
    return summarize(samples_);
  }

 private:
  TelemetrySample read() const {
    TelemetrySample sample;
    // A reading that fails leaves its field at 0; the summary then shows it rather than hiding the window.
    clock_(device_, kClockSm, &sample.sm_mhz);
    const std::optional<double> instant = instant_power_ ? instant_power_mw() : std::nullopt;
    if (instant) {
      sample.power_mw = static_cast<unsigned>(*instant);
    } else {
      power_(device_, &sample.power_mw);
    }
    unsigned long long reasons = 0;
    if (reasons_ != nullptr && reasons_(device_, &reasons) == nvml::kSuccess) sample.reasons = reasons;
    return sample;
  }

  std::optional<double> instant_power_mw() const {
    if (fields_ == nullptr) return std::nullopt;
    FieldValue field{};
    field.field_id = kFieldPowerInstant;
    if (fields_(device_, 1, &field) != nvml::kSuccess) return std::nullopt;
    return field_number(field);
  }

  void sample_until_stopped() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(kPeriodMs), [this] { return stopping_; })) {
      samples_.push_back(read());  // only this thread touches samples_ until halt() has joined it
    }
  }

  void halt() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  std::unique_ptr<nvml::Library> library_;
  std::string bus_id_;
  nvml::Device device_;
  nvml::Return (*clock_)(nvml::Device, int, unsigned*);
  nvml::Return (*power_)(nvml::Device, unsigned*);
  nvml::Return (*fields_)(nvml::Device, int, FieldValue*);
  nvml::Return (*reasons_)(nvml::Device, unsigned long long*);
  bool instant_power_ = false;
  unsigned max_sm_mhz_ = 0;
  unsigned power_limit_w_ = 0;
  std::vector<TelemetrySample> samples_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<GpuTelemetry> GpuTelemetry::open(const std::string& bus_id, std::string& why_not) {
  try {
    return std::make_unique<NvmlTelemetry>(nvml::Library::open(), bus_id);
  } catch (const Error& e) {
    why_not = plain_message(e);
    return nullptr;
  }
}

}  // namespace pickle::bench
