#pragma once
// Memory that a device stream may still read after its owner is gone (a CUDA stream runs what it had queued after it
// is destroyed; a host stream left stuck polls until it drops its work): kept until the process exits, never freed.

#include <memory>
#include <mutex>
#include <vector>

namespace pickle {

/// Keeps `object` alive until the process exits.
template <class T>
void keep_until_exit(std::unique_ptr<T> object) {
  // Leaked on purpose, list and lock included: a stream may still poll the memory while static destructors run.
  static auto* const mutex = new std::mutex;
  static auto* const kept = new std::vector<std::unique_ptr<T>>;
  std::lock_guard lock(*mutex);
  kept->push_back(std::move(object));
}

}  // namespace pickle
