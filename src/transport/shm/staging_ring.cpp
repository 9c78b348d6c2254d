#include "transport/shm/staging_ring.hpp"

#include <atomic>
#include <cstring>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/keep_until_exit.hpp"
#include "device/host/backoff.hpp"

namespace pickle::transport::shm {
namespace {

constexpr std::uint32_t kMagic = 0x70636b72;  // "pckr"
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kFlagStride = 64;
constexpr std::size_t kFlagsOffset = 64;
constexpr std::size_t kGivenUpOffset = 32;  // after the Header, in its line: only hosts read these two
constexpr std::size_t kReleaseTargetOffset = 36;

struct Header {
  std::uint32_t magic;
  std::uint32_t slots;
  std::uint64_t chunk_bytes;
};

std::size_t ring_bytes(std::size_t chunk_bytes, int slots) {
  return kHeaderBytes + chunk_bytes * static_cast<std::size_t>(slots);
}

}  // namespace

std::unique_ptr<StagingRing> StagingRing::create(MemoryKind streams_kind, int device, std::size_t chunk_bytes,
                                                 int slots) {
  if (slots < 2 || slots > kMaxSlots) {
    throw InvalidArgument(cat("shm staging ring: ", slots, " slots; between 2 and ", kMaxSlots, " are possible"));
  }
  if (chunk_bytes < 4096) throw InvalidArgument(cat("shm staging ring: chunks of ", chunk_bytes, " bytes; at least 4096"));
  chunk_bytes = (chunk_bytes + 4095) / 4096 * 4096;  // page-aligned slots keep every copy's start aligned
  std::unique_ptr<StagingRing> ring(new StagingRing());
  ring->bytes_ = ring_bytes(chunk_bytes, slots);
  ring->owned_ = device::allocate(MemoryKind::Host, ring->bytes_);
  ring->base_ = static_cast<std::byte*>(ring->owned_->data());
  std::memset(ring->base_, 0, kHeaderBytes);
  Header header{kMagic, static_cast<std::uint32_t>(slots), chunk_bytes};
  std::memcpy(ring->base_, &header, sizeof header);
  ring->chunk_bytes_ = chunk_bytes;
  ring->slots_ = slots;
  ring->attach(streams_kind, device);
  return ring;
}

std::unique_ptr<StagingRing> StagingRing::import(const device::MemoryDescriptor& descriptor, UniqueFd fd,
                                                 MemoryKind streams_kind, int device) {
  if (descriptor.kind != MemoryKind::Host || descriptor.bytes < kHeaderBytes) {
    throw ProtocolError(cat("shm staging ring: the peer sent ", memory_kind_name(descriptor.kind), " memory of ",
                            descriptor.bytes, " bytes, not a ring"));
  }
  std::unique_ptr<StagingRing> ring(new StagingRing());
  ring->mapped_ = device::import_memory(descriptor, std::move(fd));
  ring->base_ = static_cast<std::byte*>(ring->mapped_->data());
  ring->bytes_ = descriptor.bytes;
  Header header;
  std::memcpy(&header, ring->base_, sizeof header);
  if (header.magic != kMagic || header.slots < 2 || header.slots > kMaxSlots || header.chunk_bytes < 4096 ||
      ring_bytes(header.chunk_bytes, static_cast<int>(header.slots)) > descriptor.bytes) {
    throw ProtocolError(cat("shm staging ring: bad header (", header.slots, " slots of ", header.chunk_bytes,
                            " bytes in ", descriptor.bytes, " bytes)"));
  }
  ring->chunk_bytes_ = header.chunk_bytes;
  ring->slots_ = static_cast<int>(header.slots);
  ring->attach(streams_kind, device);
  return ring;
}

void StagingRing::attach(MemoryKind streams_kind, int device) {
  registration_ = device::register_host_memory(streams_kind, base_, bytes_, device);
}

StagingRing::~StagingRing() = default;

device::ExportedMemory StagingRing::export_memory() const { return device::export_memory(base_); }

std::uint32_t* StagingRing::full_host(int slot) const noexcept {
  return reinterpret_cast<std::uint32_t*>(base_ + kFlagsOffset + static_cast<std::size_t>(2 * slot) * kFlagStride);
}
std::uint32_t* StagingRing::free_host(int slot) const noexcept {
  return reinterpret_cast<std::uint32_t*>(base_ + kFlagsOffset + static_cast<std::size_t>(2 * slot + 1) * kFlagStride);
}

void* StagingRing::slot_for_streams(int slot) const noexcept {
  return registration_->device_address(base_ + kHeaderBytes + static_cast<std::size_t>(slot) * chunk_bytes_);
}
std::uint32_t* StagingRing::full_for_streams(int slot) const noexcept {
  return static_cast<std::uint32_t*>(registration_->device_address(full_host(slot)));
}
std::uint32_t* StagingRing::free_for_streams(int slot) const noexcept {
  return static_cast<std::uint32_t*>(registration_->device_address(free_host(slot)));
}

bool StagingRing::full_reached(int slot, std::uint32_t use) const noexcept {
  return device::host::flag_reached(device::host::load_acquire(full_host(slot)), use);
}
bool StagingRing::free_reached(int slot, std::uint32_t use) const noexcept {
  return device::host::flag_reached(device::host::load_acquire(free_host(slot)), use);
}

void StagingRing::mark_given_up() noexcept {
  // seq_cst: before the flag stores of release() and the failure's report, whichever thread goes on from them.
  std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(base_ + kGivenUpOffset)).store(1);
}
const std::uint32_t* StagingRing::given_up_word() const noexcept {
  return reinterpret_cast<const std::uint32_t*>(base_ + kGivenUpOffset);
}

void StagingRing::keep_until_exit(std::unique_ptr<StagingRing> ring) { pickle::keep_until_exit(std::move(ring)); }

void StagingRing::release() noexcept {
  // Raised to one target, recorded by the first call of either rank: 2^30 past the highest flag then (every wait a
  // stream has queued passes, and none is 2^31 behind it). By value, not by a fixed step: the pair's streams,
  // running through, write older uses back over raised flags (a later call raises those again), and a flag left
  // alone must not move twice (2^31 past a wait reads as behind it, for ever).
  std::atomic_ref<std::uint32_t> target_word(*reinterpret_cast<std::uint32_t*>(base_ + kReleaseTargetOffset));
  std::uint32_t target = target_word.load();
  if (target == 0) {
    std::uint32_t highest = device::host::load_acquire(full_host(0));
    for (int slot = 0; slot < slots_; ++slot) {
      for (const std::uint32_t* flag : {full_host(slot), free_host(slot)}) {
        const std::uint32_t value = device::host::load_acquire(flag);
        if (!device::host::flag_reached(highest, value)) highest = value;
      }
    }
    std::uint32_t proposed = highest + (1u << 30);
    if (proposed == 0) proposed = 1;  // 0 says "never released"
    target = target_word.compare_exchange_strong(target, proposed) ? proposed : target;
  }
  auto raise = [target](std::uint32_t* flag) {
    std::atomic_ref<std::uint32_t> word(*flag);
    std::uint32_t value = word.load(std::memory_order_acquire);
    while (!device::host::flag_reached(value, target) && !word.compare_exchange_weak(value, target)) {
    }
  };
  for (int slot = 0; slot < slots_; ++slot) {
    raise(full_host(slot));
    raise(free_host(slot));
  }
}

}  // namespace pickle::transport::shm
