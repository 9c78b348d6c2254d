#include "device/stream.hpp"

#include <atomic>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"

namespace pickle::device {

void check_flag_address(const void* addr, std::string_view op) {
  if (addr == nullptr) throw InvalidArgument(cat("stream ", op, ": the flag address is null"));
  if (reinterpret_cast<std::uintptr_t>(addr) % alignof(std::uint32_t) != 0) {
    throw InvalidArgument(cat("stream ", op, ": the flag address ", addr, " is not 4-byte aligned"));
  }
}

void Event::synchronize() { synchronize_until(Deadline::after_seconds(env::timeout_seconds())); }

Stream::Stream() {
  static std::atomic<std::uint64_t> next{1};
  serial_ = next.fetch_add(1, std::memory_order_relaxed);
}

void Stream::synchronize() { synchronize_until(Deadline::after_seconds(env::timeout_seconds())); }

std::unique_ptr<Stream> make_stream(MemoryKind kind, int device) {
  return kind == MemoryKind::Host ? host::make_stream() : cuda::make_stream(device);
}

std::unique_ptr<Event> make_event(MemoryKind kind, int device) {
  return kind == MemoryKind::Host ? host::make_event() : cuda::make_event(device);
}

}  // namespace pickle::device
