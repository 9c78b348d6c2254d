#pragma once
// NVML (libnvidia-ml.so.1), loaded with dlopen: the toolkit ships no nvml.h here, and machines without a driver have
// no library. The slice of nvml.h that pickle uses is declared in nvml_library.cpp and here; these values and layouts
// are NVML's stable ABI. Two users: the topology scan (NVLinks, driver version: nvml.cpp) and the benchmarks' GPU
// telemetry (clocks, power, clock-event reasons: tools/pickle/bench/gpu_telemetry.cpp).

#include <cstdint>
#include <memory>
#include <string>

#include "core/dynlib.hpp"

namespace pickle::topology::nvml {

using Return = int;
constexpr Return kSuccess = 0;
struct DeviceStruct;
using Device = DeviceStruct*;

/// The library, initialised (nvmlInit_v2) while the object lives and shut down when it goes. NVML counts
/// initialisations, so several may live at once.
class Library {
 public:
  /// UnavailableError naming the library and dlopen's or nvmlInit's reason when NVML cannot be used.
  static std::unique_ptr<Library> open();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();

  /// The file the loader chose.
  std::string path() const { return library_.path(); }
  /// nvmlErrorString's text with the code.
  std::string error(Return result) const;
  /// The GPU at PCI address `bus_id` ("0000:18:00.0"; matching the CUDA runtime's GPUs whatever
  /// CUDA_VISIBLE_DEVICES says); UnavailableError naming it when NVML has none there.
  Device device(const std::string& bus_id) const;

  /// An entry point that every supported driver exports (UnavailableError when missing).
  template <class F>
  F* symbol(const char* name) const {
    return library_.symbol<F>(name);
  }
  /// An entry point that only some drivers export; nullptr when this one does not.
  template <class F>
  F* find(const char* name) const noexcept {
    return library_.find<F>(name);
  }

 private:
  explicit Library(DynamicLibrary library);

  DynamicLibrary library_;
  Return (*shutdown_)();
  const char* (*error_string_)(Return);
  Return (*handle_by_bus_id_)(const char*, Device*);
};

}  // namespace pickle::topology::nvml
