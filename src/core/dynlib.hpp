#pragma once
// Optional libraries (NVML, NCCL, libfabric) are loaded at run time, so that one pickle binary runs on machines that
// lack them and says so instead of failing to start. This is the one place that calls dlopen/dlsym.

#include <cstring>
#include <optional>
#include <string>

namespace pickle {

/// An open shared library (dlopen); closed on destruction. Move-only.
class DynamicLibrary {
 public:
  /// Opens `name` (a soname such as "libnccl.so.2", or a path) with RTLD_NOW | RTLD_LOCAL.
  /// Throws UnavailableError naming the library and carrying dlerror()'s text when it cannot be loaded.
  static DynamicLibrary open(const std::string& name);
  /// Like open(), but returns nullopt and stores dlerror()'s text in *error (when given) instead of throwing.
  static std::optional<DynamicLibrary> try_open(const std::string& name, std::string* error = nullptr);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  /// The name it was opened with.
  const std::string& name() const { return name_; }
  /// The file the loader actually chose (e.g. "/usr/lib/x86_64-linux-gnu/libnccl.so.2"), so that a report can say
  /// which of several installed copies ran; the name itself when the loader cannot tell.
  std::string path() const;
  /// dlopen's handle, for a third-party library that resolves symbols itself (cuDNN's frontend dlsym's from a handle
  /// it is given). It stays valid while this object lives.
  void* native_handle() const noexcept { return handle_; }

  /// The symbol as a function pointer of type F*, e.g. `lib.symbol<int(int*)>("ncclGetVersion")`.
  /// Throws UnavailableError naming the library and the symbol when it is missing.
  template <class F>
  F* symbol(const char* symbol_name) const {
    return cast<F>(raw_symbol(symbol_name));
  }
  /// The symbol, or nullptr when this version of the library does not export it.
  template <class F>
  F* find(const char* symbol_name) const noexcept {
    return cast<F>(raw_symbol_noexcept(symbol_name));
  }

 private:
  DynamicLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void* raw_symbol(const char* symbol_name) const;
  void* raw_symbol_noexcept(const char* symbol_name) const noexcept;

  // dlsym returns an object pointer; POSIX guarantees it converts to a function pointer. memcpy says so without the
  // conditionally-supported reinterpret_cast between object and function pointers.
  template <class F>
  static F* cast(void* address) noexcept {
    F* function = nullptr;
    static_assert(sizeof function == sizeof address);
    std::memcpy(&function, &address, sizeof function);
    return function;
  }

  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace pickle
