#include "topology/nvml_library.hpp"

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::topology::nvml {

std::unique_ptr<Library> Library::open() {
  return std::unique_ptr<Library>(new Library(DynamicLibrary::open("libnvidia-ml.so.1")));
}

Library::Library(DynamicLibrary library)
    : library_(std::move(library)),
      shutdown_(library_.symbol<Return()>("nvmlShutdown")),
      error_string_(library_.symbol<const char*(Return)>("nvmlErrorString")),
      handle_by_bus_id_(library_.symbol<Return(const char*, Device*)>("nvmlDeviceGetHandleByPciBusId_v2")) {
  // The _v2 entry points exist since the driver 400 series; an older library fails here, as one whose driver NVML
  // cannot talk to does at init.
  Return result = library_.symbol<Return()>("nvmlInit_v2")();
  if (result != kSuccess) throw UnavailableError(cat("nvmlInit_v2 failed: ", error(result)));
}

Library::~Library() { shutdown_(); }

std::string Library::error(Return result) const {
  const char* text = error_string_(result);
  return cat(text != nullptr ? text : "unknown NVML error", " (", result, ")");
}

Device Library::device(const std::string& bus_id) const {
  Device device = nullptr;
  Return result = handle_by_bus_id_(bus_id.c_str(), &device);
  if (result != kSuccess) throw UnavailableError(cat("NVML has no GPU at ", bus_id, ": ", error(result)));
  return device;
}

}  // namespace pickle::topology::nvml
