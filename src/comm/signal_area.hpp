#pragma once
// Every rank keeps, in shared host memory, one block of 32-bit words per peer: signal slots (signal/wait, and the
// collectives' ready and token slots) and completion slots (a posted recv completes when its slot reaches the
// generation the receiver chose). Peers on this host map the block and bump words with stream write-values after their
// copies; the owner waits on them from a stream or reads them from the host with an atomic load. On CUDA the memory is
// host-registered (pinned, mapped), so copy engines write it and streams wait on it without any kernel. Peers on other
// hosts map nothing: their words are set here, by the progress and transport threads, when their messages arrive. A
// second block per peer holds "sent" words: a send over the net transport completes when its writes did, here, not when
// the receiver's word (which this rank may not be able to read) moves; a send over shm when the receiver's stream,
// having copied the message out of the ring, writes it. A sender's own word can be released from here when the peer
// fails, without writing into the peer's memory.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/export.hpp"
#include "device/fd_channel.hpp"
#include "device/host_registration.hpp"
#include "device/memory.hpp"

namespace pickle::comm {

/// Signal slots per peer: the application's (Communicator::kSignalSlots, slots 0..63), then the collectives' ready
/// slot: a peer's stream counts there the calls it has reached whose data this rank writes into its buffers; then
/// the pipeline's token slot (PICKLE_PIPELINE_SCHEDULE=ordered): a peer's stream counts there its copies into a
/// third rank after which this rank's copy into that rank may go (collectives/pipeline.cpp).
inline constexpr int kApplicationSignalSlots = 64;
inline constexpr int kCollectiveReadySlot = kApplicationSignalSlots;
inline constexpr int kCollectiveTokenSlot = kApplicationSignalSlots + 1;
/// The allreduce mailboxes (collectives/mailbox.cpp): a peer's stream counts in "filled" the calls whose input it has
/// copied into this rank's mailbox, and in "emptied" the calls whose input of this rank it has reduced (so that this
/// rank may copy into that cell again). Waits on them are watched (Communicator::Impl::watch_stalled_waits).
inline constexpr int kMailboxFilledSlot = kApplicationSignalSlots + 2;
inline constexpr int kMailboxEmptiedSlot = kApplicationSignalSlots + 3;
inline constexpr int kPeerSignalSlots = kApplicationSignalSlots + 4;
/// Cells per mailbox: how many calls a rank's copies may run ahead of a peer's reductions (collectives/mailbox.hpp).
inline constexpr int kMailboxDepth = 4;

/// A count of a peer's signal slot that a stream is to wait for (batched waits).
struct SignalTarget {
  int peer;
  std::uint32_t expected;
};

/// How errors name a signal slot.
inline std::string signal_slot_name(int slot) {
  if (slot == kCollectiveReadySlot) return "the collectives' ready signal";
  if (slot == kCollectiveTokenSlot) return "the pipeline's token";
  if (slot == kMailboxFilledSlot) return "the allreduce mailbox's filled signal";
  if (slot == kMailboxEmptiedSlot) return "the allreduce mailbox's emptied signal";
  return "signal " + std::to_string(slot);
}
inline constexpr int kCompletionSlots = 4096;
/// shm puts' "source read" words, in the "sent" block only: this rank's shm sending stream writes word
/// kShmPutWordBase + (n % kShmPutSlots) once put n's source has been read, and the put's stream waits on it.
inline constexpr int kShmPutSlots = 1024;
inline constexpr int kShmPutWordBase = kPeerSignalSlots + kCompletionSlots;
/// The allreduce mailboxes' labels, host words that peers' hosts write (SignalArea::store_remote), in the block this
/// rank keeps for the writer: the sender of mailbox call n writes the call's label into entry n % kMailboxLabels, and
/// the receiver compares it with its own call n (collectives/mailbox.cpp). Words of each entry: bytes, type and
/// operator, the collective's sequence number, the call's number (1 to 2^32 - 1, written last; 0 while the entry is
/// being written). Then the out-of-step word: a rank that found the collectives out of step (kOutOfStep), or that
/// gave up a mailbox call after its labels went out (kGaveUp), writes it into every peer's; their progress threads
/// then fail the pair (Communicator::Impl::watch_stalled_waits), releasing any stream that waits on this rank.
inline constexpr int kMailboxLabels = 64;
inline constexpr int kMailboxLabelWords = 4;
inline constexpr int kMailboxLabelBase = kShmPutWordBase + kShmPutSlots;
inline constexpr int kOutOfStepWord = kMailboxLabelBase + kMailboxLabels * kMailboxLabelWords;
/// The lost-data word: the first collective call (its number in the CollectiveFamily, low 32 bits; 0: none) from
/// which the writer's streams may have passed on data they never received: a collective receive of the writer
/// failed, and its word was moved so that its streams go on (Communicator::Impl::note_collective_loss_locked). The
/// writer stores it into every peer's block on this host before it moves that word, so a peer whose stream got
/// anything computed from the missing data finds it set when its call's end check runs (collectives/plumbing.cpp,
/// Call::finish).
inline constexpr int kCollectiveLossWord = kOutOfStepWord + 1;
inline constexpr int kWordsPerPeer = kCollectiveLossWord + 1;
/// Values of kOutOfStepWord (0: in step).
inline constexpr std::uint32_t kOutOfStep = 1;
inline constexpr std::uint32_t kGaveUp = 2;
/// What a peer's out-of-step word says, for errors.
inline std::string out_of_step_reason(int peer, std::uint32_t word) {
  if (word == kGaveUp) {
    return "peer " + std::to_string(peer) + " gave up an allreduce through the mailboxes after a failure of its own, "
           "so its counts will not come";
  }
  return "peer " + std::to_string(peer) + " found the ranks' collectives out of step (an allreduce through the "
         "mailboxes of another size, type or operator than its own, or at another place in the sequence of "
         "collectives)";
}

class SignalArea {
 public:
  /// Allocates and zeroes this rank's area, then exchanges areas with every peer on this host (`same_host`) over the
  /// control channels (collective: every rank of the channels calls it at the same point).
  SignalArea(int rank, int world, MemoryKind streams_kind, int device,
             std::vector<std::optional<device::FdChannel>>& channels, const std::vector<bool>& same_host,
             const Deadline& deadline);
  ~SignalArea();

  /// Keeps `area` (its memory, its registrations and its mappings of the peers' areas) until the process exits, never
  /// freed: for a communicator destroyed while streams may still wait on its words (Communicator::Impl::
  /// retire_signal_area). The cost: about 40 KiB times the world size, for this rank's area and for each peer's area
  /// that it maps.
  static void keep_until_exit(std::unique_ptr<SignalArea> area);

  /// Word `index` of the block this rank keeps for `peer` (what `peer` writes), as the host sees it.
  std::uint32_t* local_word(int peer, int index) const;
  /// The same word as this rank's streams address it (wait_value).
  std::uint32_t* local_word_for_streams(int peer, int index) const;
  /// Word `index` of the block that `peer` keeps for this rank (what this rank writes), as streams address it.
  /// Peers on this host only (InternalError otherwise).
  std::uint32_t* remote_word_for_streams(int peer, int index) const;
  /// The same word as the host sees it (load_remote reads it).
  const std::uint32_t* remote_word(int peer, int index) const;
  /// This rank's "sent" word `index` for `peer`: as the host sees it, and as streams address it.
  std::uint32_t* sent_word(int peer, int index) const;
  std::uint32_t* sent_word_for_streams(int peer, int index) const;
  /// `peer`'s "sent" word `index` for this rank, as this rank's streams address it (same host only): the shm
  /// transport's receiving stream completes the sender's send there once it has copied the message out.
  std::uint32_t* remote_sent_word_for_streams(int peer, int index) const;

  /// Acquire-load of a local word from the host.
  std::uint32_t load(int peer, int index) const;
  /// Acquire-load, from the host, of word `index` of the block that `peer` keeps for this rank (same host only).
  std::uint32_t load_remote(int peer, int index) const;
  /// Release-store into a local word from the host (a net arrival; releasing waits when a peer fails).
  void store(int peer, int index, std::uint32_t value) const;
  /// Release-store, from the host, into word `index` of the block that `peer` keeps for this rank (same host only).
  void store_remote(int peer, int index, std::uint32_t value) const;
  /// Acquire-load of a "sent" word, and its release-advance to `value`: the word only moves forward (wrapping as
  /// flag_reached compares). Sends that reuse a slot complete on different rail threads, and the older one's
  /// callback can run after the newer one's (the receiver freed the slot once the older data landed, before the
  /// sender's thread got round to it): a plain store would move the word back, and the newer send never completes.
  std::uint32_t load_sent(int peer, int index) const;
  void advance_sent(int peer, int index, std::uint32_t value) const;

 private:
  int rank_;
  int world_;
  std::unique_ptr<device::Allocation> local_;
  std::unique_ptr<device::HostRegistration> local_registration_;
  struct Remote {
    std::unique_ptr<device::ImportedMemory> memory;
    std::unique_ptr<device::HostRegistration> registration;
  };
  std::vector<Remote> remotes_;  // empty entries for peers on other hosts

  const Remote& mapped(int peer) const;
};

}  // namespace pickle::comm
