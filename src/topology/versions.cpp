// Versions of the optional libraries pickle loads at run time. Loading them here is harmless: the handles are closed
// again, and the loaders that use them for real (NCCL backend, net transport) open their own.
#include <cstdint>

#include <pickle/error.hpp>

#include "core/dynlib.hpp"
#include "core/format.hpp"
#include "topology/probes.hpp"

namespace pickle::topology {
namespace {

/// ncclGetVersion's code: major*10000 + minor*100 + patch since NCCL 2.9, major*1000 + minor*100 + patch before.
std::string nccl_version_string(int code) {
  int major = 0, minor = 0, patch = 0;
  if (code >= 10000) {
    major = code / 10000;
    minor = (code % 10000) / 100;
  } else {
    major = code / 1000;
    minor = (code % 1000) / 100;
  }
  patch = code % 100;
  return cat(major, ".", minor, ".", patch);
}

template <class Query>
LibraryVersion library_version(const char* soname, Query query) {
  LibraryVersion result;
  std::string error;
  auto library = DynamicLibrary::try_open(soname, &error);
  if (!library) {
    result.detail = error;
    return result;
  }
  try {
    result.version = query(*library);
    result.found = true;
    result.detail = library->path();
  } catch (const Error& e) {
    result.detail = cat(library->path(), ": ", e.message());
  }
  return result;
}

}  // namespace

LibraryVersion nccl_version() {
  return library_version("libnccl.so.2", [](const DynamicLibrary& library) {
    auto get_version = library.symbol<int(int*)>("ncclGetVersion");  // returns ncclResult_t, 0 = success
    int code = 0;
    int result = get_version(&code);
    if (result != 0) throw UnavailableError(cat("ncclGetVersion returned ", result));
    return nccl_version_string(code);
  });
}

LibraryVersion libfabric_version() {
  return library_version("libfabric.so.1", [](const DynamicLibrary& library) {
    auto fi_version = library.symbol<std::uint32_t()>("fi_version");  // FI_VERSION(major, minor) = major << 16 | minor
    std::uint32_t code = fi_version();
    return cat(code >> 16, ".", code & 0xFFFFu);
  });
}

}  // namespace pickle::topology
