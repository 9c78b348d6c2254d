#pragma once
// One direction of the shm transport between two ranks: a ring of chunk-sized slots in pinned shared host memory,
// with a pair of flags per slot. The sender's stream copies a chunk into a slot (device-to-host) and bumps the
// slot's `full` flag; the receiver's stream waits for it, copies the chunk out (host-to-device) and bumps `free`.
// Both flags count uses of the slot: chunk c lives in slot c % slots as its (c / slots + 1)-th use, so a sender
// waits until `free` reached the previous use and a receiver until `full` reached this one. Only copy engines and
// stream memory operations touch the ring: no kernel, no host thread in the data path.
//
// Layout: a 4 KiB header (magic, geometry, the "gave up" word and the release target, then each flag on its own
// 64-byte line, since the peer's GPU polls them across PCIe), then the slots. The sender creates the ring, so its
// PICKLE_SHM_CHUNK/SLOTS decide the geometry, and the receiver reads it from the header.
//
// The "gave up" word: a sender that stops keeping the ring in step with a receiver that may be alive (its side of the
// pair failed, and released or stopped the ring; or it closed with copies still queued) sets it before anything else,
// and before it reports the failure to its application. From then on what the receiver's stream copies out may be
// stale slots, or a source the application wrote again: the receiver, having seen a message complete, reads the word
// and does not report the message as received when it is set.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <pickle/memory.hpp>

#include "core/unique_fd.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"
#include "device/host_registration.hpp"
#include "device/memory.hpp"

namespace pickle::transport::shm {

class StagingRing {
 public:
  static constexpr int kMaxSlots = 16;

  /// A new ring of `slots` chunks of `chunk_bytes` (InvalidArgument outside 2..kMaxSlots slots or below 4 KiB chunks),
  /// registered for streams of `streams_kind` on `device`.
  static std::unique_ptr<StagingRing> create(MemoryKind streams_kind, int device, std::size_t chunk_bytes, int slots);
  /// The peer's ring, mapped and registered; its header is checked (ProtocolError when it is not a ring).
  static std::unique_ptr<StagingRing> import(const device::MemoryDescriptor& descriptor, UniqueFd fd,
                                             MemoryKind streams_kind, int device);

  /// For sending to the peer that imports it (create()d rings only).
  device::ExportedMemory export_memory() const;

  std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  int slots() const noexcept { return slots_; }
  /// Slot `slot`'s data as streams address it.
  void* slot_for_streams(int slot) const noexcept;
  /// The flags of slot `slot` as streams address them.
  std::uint32_t* full_for_streams(int slot) const noexcept;
  std::uint32_t* free_for_streams(int slot) const noexcept;
  /// Whether the stream that writes slot `slot`'s `full` (the sender's) or `free` flag (the receiver's) has written
  /// `use` or a later use there, read from the host: how the shm workers pace their queuing.
  bool full_reached(int slot, std::uint32_t use) const noexcept;
  bool free_reached(int slot, std::uint32_t use) const noexcept;
  /// Keeps `ring` mapped until the process exits: a stream that may still poll its flags (a CUDA stream goes on after
  /// it is destroyed) must not read memory that went away.
  static void keep_until_exit(std::unique_ptr<StagingRing> ring);
  /// The sender (this ring's creator): marks that it gave the pair up. Before releasing or stopping the ring.
  void mark_given_up() noexcept;
  /// The receiver: the "gave up" word as the host addresses it (non-zero: given up), read after the completion it
  /// qualifies.
  const std::uint32_t* given_up_word() const noexcept;
  /// Raises every flag, from the host, to 2^30 uses past the highest flag at the ring's first release (by either
  /// rank; the target is kept in the header): any stream waiting on this ring goes on (used when the pair failed, so
  /// that no stream stays blocked on a rank that will never write). Idempotent by value: a later call, by either rank,
  /// raises again only the flags that streams wrote older uses back into since.
  void release() noexcept;

  ~StagingRing();

 private:
  StagingRing() = default;
  void attach(MemoryKind streams_kind, int device);
  std::uint32_t* full_host(int slot) const noexcept;
  std::uint32_t* free_host(int slot) const noexcept;

  std::unique_ptr<device::Allocation> owned_;      // create()
  std::unique_ptr<device::ImportedMemory> mapped_;  // import()
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::unique_ptr<device::HostRegistration> registration_;
  std::size_t chunk_bytes_ = 0;
  int slots_ = 0;
};

}  // namespace pickle::transport::shm
