#include "transport/ipc/completion_lanes.hpp"

#include <exception>

#include "core/log.hpp"
#include "device/host/backoff.hpp"

namespace pickle::transport::ipc {

CompletionLanes::CompletionLanes(MemoryKind kind, int device) : kind_(kind), device_(device) {}

std::shared_ptr<CompletionLanes::Lane> CompletionLanes::lane_of(const device::Stream& stream) {
  std::lock_guard lock(mutex_);
  auto [entry, added] = lanes_.try_emplace(stream.serial());
  if (added) {
    entry->second = std::make_shared<Lane>();
    entry->second->served = stream.weak_from_this();
    entry->second->served_shared = !entry->second->served.expired();
    forget_idle_lanes_of_gone_streams_locked();
  }
  return entry->second;
}

void CompletionLanes::forget_idle_lanes_of_gone_streams_locked() {
  std::erase_if(lanes_, [](auto& entry) {
    Lane& lane = *entry.second;
    if (!lane.served_shared || !lane.served.expired()) return false;
    std::lock_guard lane_lock(lane.mutex);
    // A lane that still has writes to run keeps its stream, and so the teardown's account of it (streams()).
    return !lane.stream || lane.stream->idle_now();
  });
}

CompletionLanes::Written CompletionLanes::write_after(device::Stream& stream, std::uint32_t* word,
                                                      const std::uint32_t* host_word, std::uint32_t value) {
  std::shared_ptr<Lane> lane = lane_of(stream);
  std::lock_guard lock(lane->mutex);
  const bool burst = lane->last_word != nullptr &&
                     !device::host::flag_reached(device::host::load_acquire(lane->last_word), lane->last_value);
  // Whichever stream writes it, this write is the one the next send on `stream` follows.
  const auto remember = [&] {
    lane->last_word = host_word;
    lane->last_value = value;
  };
  if (!burst) {
    stream.write_value(word, value);
    remember();
    return {};
  }
  try {
    if (!lane->stream) {
      lane->copied = device::make_ordering_event(kind_, device_);
      lane->written = device::make_ordering_event(kind_, device_);
      lane->stream = device::make_stream(kind_, device_);
    }
    stream.record(*lane->copied);
    lane->stream->wait(*lane->copied);
    lane->stream->write_value(word, value);
  } catch (const std::exception& e) {
    // Nothing half-done matters: a record on `stream` that no lane waits for orders nothing, and a wait the lane
    // took without its write holds up nothing but the lane. The lane stays for later bursts (or is made then).
    PICKLE_LOG(Warn, "ipc", "completion lane refused a write (" << e.what() << "); writing on the copy's stream");
    stream.write_value(word, value);
    remember();
    return {};
  }
  remember();
  lane_writes_.fetch_add(1, std::memory_order_relaxed);
  return {.lane = lane, .number = ++lane->writes};
}

void CompletionLanes::interrupt(const device::Stream& stream) {
  std::shared_ptr<Lane> lane;
  {
    std::lock_guard lock(mutex_);
    auto found = lanes_.find(stream.serial());
    if (found == lanes_.end()) return;  // no send wrote after a copy there
    lane = found->second;
  }
  std::lock_guard lock(lane->mutex);
  lane->last_word = nullptr;
}

bool CompletionLanes::join(device::Stream& stream, const Written& written) {
  std::shared_ptr<Lane> lane = written.lane.lock();
  if (!lane) return false;  // written on the stream itself, or on a lane that went once idle (its writes ran)
  std::lock_guard lock(lane->mutex);
  if (lane->joined >= written.number) return false;  // the stream waits past it already
  lane->stream->record(*lane->written);
  stream.wait(*lane->written);
  lane->joined = lane->writes;
  return true;
}

std::vector<std::weak_ptr<device::Stream>> CompletionLanes::streams() {
  std::vector<std::weak_ptr<device::Stream>> made;
  std::lock_guard lock(mutex_);
  for (auto& [serial, lane] : lanes_) {
    std::lock_guard lane_lock(lane->mutex);
    if (lane->stream) made.push_back(lane->stream);
  }
  return made;
}

}  // namespace pickle::transport::ipc
