#include "comm/signal_area.hpp"

#include <cstring>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/keep_until_exit.hpp"
#include "device/descriptor.hpp"
#include "device/host/backoff.hpp"

namespace pickle::comm {
namespace {

constexpr std::size_t kBlockBytes = kWordsPerPeer * sizeof(std::uint32_t);

std::uint32_t* word_in(void* base, int block, int index) {
  return static_cast<std::uint32_t*>(base) + static_cast<std::size_t>(block) * kWordsPerPeer + index;
}

}  // namespace

SignalArea::SignalArea(int rank, int world, MemoryKind streams_kind, int device,
                       std::vector<std::optional<device::FdChannel>>& channels, const std::vector<bool>& same_host,
                       const Deadline& deadline)
    : rank_(rank), world_(world), remotes_(world) {
  // Blocks [0, world): what each peer writes; [world, 2 world): this rank's "sent" words per peer.
  const std::size_t bytes = 2 * kBlockBytes * static_cast<std::size_t>(world);
  local_ = device::allocate(MemoryKind::Host, bytes);
  std::memset(local_->data(), 0, bytes);
  local_registration_ = device::register_host_memory(streams_kind, local_->data(), bytes, device);

  auto exported = device::export_memory(local_->data());
  auto descriptor = device::serialize(exported.descriptor);
  for (int peer = 0; peer < world; ++peer) {
    if (peer != rank && same_host[peer]) channels[peer]->send(descriptor, exported.fd.get(), deadline);
  }
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank || !same_host[peer]) continue;
    auto message = channels[peer]->recv(deadline);
    auto remote_descriptor = device::parse_descriptor(message.bytes);
    if (remote_descriptor.kind != MemoryKind::Host || remote_descriptor.bytes < bytes) {
      throw ProtocolError(cat("rank ", rank, " -> peer ", peer, ": signal area of ", remote_descriptor.bytes,
                              " bytes, expected host memory of ", bytes));
    }
    Remote& remote = remotes_[peer];
    remote.memory = device::import_memory(remote_descriptor, std::move(message.fd));
    remote.registration = device::register_host_memory(streams_kind, remote.memory->data(), bytes, device);
  }
}

SignalArea::~SignalArea() = default;

void SignalArea::keep_until_exit(std::unique_ptr<SignalArea> area) { pickle::keep_until_exit(std::move(area)); }

std::uint32_t* SignalArea::local_word(int peer, int index) const { return word_in(local_->data(), peer, index); }

std::uint32_t* SignalArea::local_word_for_streams(int peer, int index) const {
  return static_cast<std::uint32_t*>(local_registration_->device_address(local_word(peer, index)));
}

const SignalArea::Remote& SignalArea::mapped(int peer) const {
  const Remote& remote = remotes_[peer];
  if (!remote.memory) {
    throw Error(ErrorCode::Internal, cat("rank ", rank_, " -> peer ", peer, ": the peer's signal words are not mapped "
                                         "here (it is on another host)"));
  }
  return remote;
}

std::uint32_t* SignalArea::sent_word(int peer, int index) const { return word_in(local_->data(), world_ + peer, index); }

std::uint32_t* SignalArea::sent_word_for_streams(int peer, int index) const {
  return static_cast<std::uint32_t*>(local_registration_->device_address(sent_word(peer, index)));
}

std::uint32_t SignalArea::load_sent(int peer, int index) const {
  return std::atomic_ref<std::uint32_t>(*sent_word(peer, index)).load(std::memory_order_acquire);
}

void SignalArea::advance_sent(int peer, int index, std::uint32_t value) const {
  std::atomic_ref<std::uint32_t> word(*sent_word(peer, index));
  std::uint32_t current = word.load(std::memory_order_relaxed);
  while (!device::host::flag_reached(current, value) &&
         !word.compare_exchange_weak(current, value, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

std::uint32_t* SignalArea::remote_word_for_streams(int peer, int index) const {
  const Remote& remote = mapped(peer);
  return static_cast<std::uint32_t*>(remote.registration->device_address(word_in(remote.memory->data(), rank_, index)));
}

std::uint32_t* SignalArea::remote_sent_word_for_streams(int peer, int index) const {
  const Remote& remote = mapped(peer);
  return static_cast<std::uint32_t*>(
      remote.registration->device_address(word_in(remote.memory->data(), world_ + rank_, index)));
}

std::uint32_t SignalArea::load(int peer, int index) const {
  return std::atomic_ref<std::uint32_t>(*local_word(peer, index)).load(std::memory_order_acquire);
}

const std::uint32_t* SignalArea::remote_word(int peer, int index) const {
  return word_in(mapped(peer).memory->data(), rank_, index);
}

std::uint32_t SignalArea::load_remote(int peer, int index) const {
  return device::host::load_acquire(remote_word(peer, index));
}

void SignalArea::store(int peer, int index, std::uint32_t value) const {
  std::atomic_ref<std::uint32_t>(*local_word(peer, index)).store(value, std::memory_order_release);
}

void SignalArea::store_remote(int peer, int index, std::uint32_t value) const {
  auto* word = word_in(mapped(peer).memory->data(), rank_, index);
  std::atomic_ref<std::uint32_t>(*word).store(value, std::memory_order_release);
}

}  // namespace pickle::comm
