#include "core/dynlib.hpp"

#include <dlfcn.h>
#include <link.h>

#include <utility>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle {
namespace {

std::string last_dlerror() {
  const char* text = dlerror();
  return text != nullptr ? std::string(text) : std::string("unknown dlerror");
}

}  // namespace

std::optional<DynamicLibrary> DynamicLibrary::try_open(const std::string& name, std::string* error) {
  dlerror();  // clear a stale message so that the one we report is ours
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (error != nullptr) *error = last_dlerror();
    return std::nullopt;
  }
  return DynamicLibrary(handle, name);
}

DynamicLibrary DynamicLibrary::open(const std::string& name) {
  std::string error;
  auto library = try_open(name, &error);
  if (!library) throw UnavailableError(cat("cannot load ", name, ": ", error));
  return std::move(*library);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), name_(std::move(other.name_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

std::string DynamicLibrary::path() const {
  link_map* map = nullptr;
  if (handle_ != nullptr && dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return name_;
}

void* DynamicLibrary::raw_symbol(const char* symbol_name) const {
  // A moved-from handle is null, and dlsym(nullptr, ...) would search the whole process (RTLD_DEFAULT).
  if (handle_ == nullptr) {
    throw Error(ErrorCode::Internal, cat("symbol ", symbol_name, " looked up in a closed library"));
  }
  dlerror();
  void* address = dlsym(handle_, symbol_name);
  if (address == nullptr) {
    throw UnavailableError(cat(name_, " has no symbol ", symbol_name, " (", last_dlerror(), ")"));
  }
  return address;
}

void* DynamicLibrary::raw_symbol_noexcept(const char* symbol_name) const noexcept {
  if (handle_ == nullptr) return nullptr;
  return dlsym(handle_, symbol_name);
}

}  // namespace pickle
