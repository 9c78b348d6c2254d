#include "transport/ipc/ipc_transport.hpp"

#include <algorithm>
#include <exception>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/log.hpp"

namespace pickle::transport::ipc {

IpcTransport::IpcTransport(int rank, int world, MemoryKind kind, int device)
    : cache_(device), streams_(world), next_(world), dropped_(world) {
  const long long per_peer = env::get_int("PICKLE_IPC_STREAMS");
  if (per_peer < 1 || per_peer > 8) {
    throw InvalidArgument(cat("rank ", rank, ": PICKLE_IPC_STREAMS=", per_peer, " must be between 1 and 8"));
  }
  streams_per_peer_ = per_peer;
  const std::string completion = env::get("PICKLE_IPC_COMPLETION");
  if (completion != "lanes" && completion != "stream") {
    throw InvalidArgument(cat("rank ", rank, ": PICKLE_IPC_COMPLETION=", completion, " must be stream or lanes"));
  }
  // Host streams keep the write on the copy's stream (completion_lanes.hpp says why).
  if (completion == "lanes" && kind == MemoryKind::Cuda) lanes_ = std::make_unique<CompletionLanes>(kind, device);
  // Created up front: the progress thread and callers' threads use them without a lock of their own.
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    for (long long i = 0; i < per_peer; ++i) {
      streams_[peer].push_back(device::make_stream(kind, std::max(0, device)));
      dropped_[peer].push_back(std::make_unique<std::atomic<bool>>(false));
    }
    next_[peer] = std::make_unique<std::atomic<std::uint32_t>>(0);
  }
}

device::Stream& IpcTransport::stream(int peer) {
  auto& streams = streams_.at(peer);
  // Whole messages take turns: each ends with a fenced flag write, which then overlaps the next message's copy.
  const std::uint32_t turn = next_[peer]->fetch_add(1, std::memory_order_relaxed);
  return *streams[turn % streams.size()];
}

std::optional<std::size_t> IpcTransport::own_stream_index(int peer, const device::Stream* stream) const {
  const auto& streams = streams_.at(peer);
  for (std::size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].get() == stream) return i;
  }
  return std::nullopt;  // an application's stream
}

void IpcTransport::clear_copy_stream_error(int peer, device::Stream& stream) {
  if (!own_stream_index(peer, &stream)) return;
  try {
    stream.synchronize();  // throws the error it reports
  } catch (const std::exception&) {
  }
}

void IpcTransport::note_dropped_work(int peer, const device::Stream* stream) {
  if (const auto own = own_stream_index(peer, stream)) dropped_[peer][*own]->store(true);
}

void IpcTransport::clear_dropped_work(int peer, device::Stream& stream) {
  const auto own = own_stream_index(peer, &stream);
  if (!own || !dropped_[peer][*own]->exchange(false)) return;
  // query(), not synchronize(): the stream may hold other sends' waits for their callers' points, and the error,
  // if another send's refusal has not reported it already, is there at once.
  try {
    stream.query();
  } catch (const std::exception&) {
  }
}

void* IpcTransport::remote_address(int peer, std::uint64_t id, std::uint64_t offset, std::size_t bytes,
                                   const OpContext& ctx) {
  device::ImportedMemory* mapping = cache_.find(peer, id);
  if (mapping == nullptr) {
    throw ProtocolError(cat(describe(ctx), ": peer ", peer, " named allocation ", id,
                               " that it never announced (or released as freed)"));
  }
  if (offset > mapping->bytes() || bytes > mapping->bytes() - offset) {
    throw InvalidArgument(cat(describe(ctx), ": offset ", offset, " + ", bytes, " bytes is past the end of peer ",
                              peer, "'s allocation of ", mapping->bytes(), " bytes"));
  }
  return static_cast<char*>(mapping->data()) + offset;
}

void IpcTransport::copy(device::Stream& stream, void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0) stream.copy(dst, src, bytes);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  operations_.fetch_add(1, std::memory_order_relaxed);
}

void IpcTransport::copies(device::Stream& stream, std::span<const device::Stream::Copy> batch) {
  stream.copies(batch);
  for (const auto& one : batch) bytes_.fetch_add(one.bytes, std::memory_order_relaxed);
  operations_.fetch_add(batch.size(), std::memory_order_relaxed);
}

void IpcTransport::synchronize_all() {
  // Every stream, even after one failed (the others' copies must still finish); then the first failure.
  std::exception_ptr first;
  for (auto& streams : streams_) {
    for (auto& stream : streams) {
      try {
        stream->synchronize();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
  }
  if (first) std::rethrow_exception(first);
}

TransportStats IpcTransport::stats() const {
  TransportStats stats;
  stats.bytes = bytes_.load(std::memory_order_relaxed);
  stats.operations = operations_.load(std::memory_order_relaxed);
  stats.ipc_opens = cache_.opens();
  stats.ipc_closes = cache_.closes();
  stats.cache_hits = cache_.hits();
  if (lanes_) stats.completion_lane_writes = lanes_->lane_writes();
  return stats;
}

}  // namespace pickle::transport::ipc
