#include "p2p_context.hpp"

#include <algorithm>
#include <cstring>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/descriptor.hpp"
#include "device/fd_channel.hpp"
#include "memory_exchange.hpp"
#include "pattern.hpp"

namespace pickle::bench {
namespace {

/// CUDA's out-of-memory code, the same number for the runtime (cudaErrorMemoryAllocation) and the driver
/// (CUDA_ERROR_OUT_OF_MEMORY).
constexpr int kCudaOutOfMemory = 2;

}  // namespace

P2pContext::P2pContext(Store& store, MemoryKind kind, int device)
    : store_(&store), rank_(store.self().rank), kind_(kind), device_(device) {
  corrupt_ = env::get_bool("PICKLE_BENCH_CORRUPT");
  if (!active()) return;
  stream_ = device::make_stream(kind_, device_);
  gate_stream_ = device::make_stream(kind_, device_);
  start_ = device::make_event(kind_, device_);
  stop_ = device::make_event(kind_, device_);
  poison_.assign(std::size_t{1} << 20, kPoisonByte);
}

P2pContext::~P2pContext() {
  // The peer's mappings go before this rank's own memory; streams are drained by their own destructors.
  peer_recv_mapping_.reset();
  peer_flags_mapping_.reset();
}

std::size_t P2pContext::allocate(std::size_t capacity, std::size_t floor) {
  while (true) {
    try {
      send_ = device::allocate(kind_, capacity, device_);
      recv_ = device::allocate(kind_, capacity, device_);
      source_ = device::allocate(kind_, capacity + kShiftSpan, device_);
      flags_ = device::allocate(kind_, kFlagsBytes, device_);
      capacity_ = capacity;
      return capacity;
    } catch (const CudaError& e) {
      send_.reset();
      recv_.reset();
      source_.reset();
      if (e.cuda_code() != kCudaOutOfMemory || capacity / 2 < floor) throw;
      PICKLE_LOG(Info, "bench", "3 buffers of " << human_bytes(capacity) << " do not fit on GPU " << device_
                                                << ": trying half");
      capacity /= 2;
    }
  }
}

void P2pContext::exchange(const std::string& nonce, std::size_t needed) {
  const std::string prefix = cat("pickle-bench-", nonce, "-");
  Deadline deadline = Deadline::after_seconds(store_->timeout_seconds());
  device::FdChannel channel = [&] {
    if (rank_ == 1) {
      device::FdListener listener(prefix + "1");
      // Rank 0 connects only after the listener exists (connect retries until then), so no barrier is needed.
      return listener.accept(deadline);
    }
    return device::FdChannel::connect(prefix + "1", deadline);
  }();
  channel.set_peer(peer());
  send_export(channel, recv_->data(), deadline);
  send_export(channel, flags_->data(), deadline);
  peer_recv_mapping_ = recv_import(channel, device_, deadline);
  peer_flags_mapping_ = recv_import(channel, device_, deadline);
  if (peer_recv_mapping_->bytes() < needed) {
    throw ProtocolError(cat(describe({.rank = rank_, .peer = peer(), .op = "bench buffer exchange",
                                      .bytes = needed}),
                            ": the peer's receive buffer has only ", peer_recv_mapping_->bytes(), " bytes"));
  }
  peer_recv_ = static_cast<std::uint8_t*>(peer_recv_mapping_->data());
  peer_flags_ = static_cast<std::uint8_t*>(peer_flags_mapping_->data());
}

void P2pContext::unmap_peer() {
  peer_recv_ = nullptr;
  peer_flags_ = nullptr;
  peer_recv_mapping_.reset();
  peer_flags_mapping_.reset();
}

std::vector<std::uint8_t>& P2pContext::staging(std::size_t bytes) {
  if (staging_.size() < bytes) staging_.resize(bytes);
  return staging_;
}

void P2pContext::fill_source() {
  const std::size_t total = capacity_ + kShiftSpan;
  auto* source = static_cast<std::uint8_t*>(source_->data());
  auto& buffer = staging(std::min(total, kStagingBytes));
  for (std::size_t done = 0; done < total;) {
    std::size_t chunk = std::min(buffer.size(), total - done);
    bench::fill_source(rank_, done, buffer.data(), chunk);
    stream_->copy(source + done, buffer.data(), chunk);
    stream_->synchronize();  // the staging buffer is refilled next
    done += chunk;
  }
  std::vector<std::uint8_t> zeros(kFlagsBytes, 0);
  stream_->copy(flags_->data(), zeros.data(), zeros.size());
  stream_->synchronize();
}

void P2pContext::wait_gate(std::uint32_t sequence) {
  std::uint8_t* owner = opens_own_gate() ? static_cast<std::uint8_t*>(flags_->data()) : peer_flags_;
  stream_->wait_value(flag_word(owner, kGateWord), sequence);
}

void P2pContext::open_gate(std::uint32_t sequence) {
  if (!opens_own_gate()) return;
  gate_stream_->write_value(flag_word(static_cast<std::uint8_t*>(flags_->data()), kGateWord), sequence);
}

std::uint32_t* P2pContext::my_ping() const {
  return flag_word(static_cast<std::uint8_t*>(flags_->data()), kPingWord);
}
std::uint32_t* P2pContext::peer_ping() const { return flag_word(peer_flags_, kPingWord); }

void P2pContext::load_send_window(std::size_t bytes, std::uint64_t shift) {
  stream_->copy(send_buffer(), static_cast<std::uint8_t*>(source_->data()) + shift, bytes);
  if (corrupt_) {
    // Test hook: the receiver's check must then find exactly one wrong byte per message.
    std::size_t index = bytes / 2;
    corrupt_byte_ = static_cast<std::uint8_t>(~source_byte(rank_, shift + index));
    stream_->copy(send_buffer() + index, &corrupt_byte_, 1);
  }
}

void P2pContext::poison_recv(std::size_t bytes) {
  // One small upload, then the buffer doubles itself: device-speed copies, no message-sized host buffer.
  std::size_t done = std::min(bytes, poison_.size());
  stream_->copy(recv_buffer(), poison_.data(), done);
  while (done < bytes) {
    std::size_t chunk = std::min(done, bytes - done);
    stream_->copy(recv_buffer() + done, recv_buffer(), chunk);
    done += chunk;
  }
  stream_->synchronize();
}

std::uint64_t P2pContext::count_wrong_received(std::size_t bytes, int sender, std::uint64_t shift) {
  auto& buffer = staging(std::min(bytes, kStagingBytes));
  std::uint64_t wrong = 0;
  for (std::size_t done = 0; done < bytes;) {
    std::size_t chunk = std::min(buffer.size(), bytes - done);
    stream_->copy(buffer.data(), recv_buffer() + done, chunk);
    stream_->synchronize();
    wrong += count_wrong(buffer.data(), chunk, sender, shift + done);
    done += chunk;
  }
  return wrong;
}

}  // namespace pickle::bench
