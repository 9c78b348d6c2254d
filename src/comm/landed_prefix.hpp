#pragma once
// Which of a peer's net puts have landed here, as a signal needs to know it. A put's chunks travel on several lanes
// and rails, and puts from several streams interleave: they land in any order. A signal carries how many puts its
// sender had issued before it (n), and it may be released only once puts 0 .. n-1 are all here, not once any n are
// (a later put landing first must not release a signal that an earlier, still missing one precedes).

#include <cstdint>
#include <set>

namespace pickle::comm {

class LandedPrefix {
 public:
  /// Counting from put `first` on (0 for a communicator; tests start near the wrap).
  explicit LandedPrefix(std::uint64_t first = 0) : prefix_(first) {}

  /// The put whose sequence number has these low 31 bits (what its message id carries) landed. Sequence numbers are
  /// recovered relative to the prefix, so they may wrap at 2^31 as long as fewer puts than that are in flight.
  void land(std::uint32_t sequence_low31) {
    const std::uint64_t ahead = (sequence_low31 - static_cast<std::uint32_t>(prefix_)) & 0x7fffffffu;
    const std::uint64_t sequence = prefix_ + ahead;
    if (sequence != prefix_) {
      beyond_.insert(sequence);
      return;
    }
    ++prefix_;
    while (!beyond_.empty() && *beyond_.begin() == prefix_) {
      beyond_.erase(beyond_.begin());
      ++prefix_;
    }
  }
  /// How many puts, from the first one on, have all landed.
  std::uint64_t count() const noexcept { return prefix_; }
  /// Puts that landed ahead of one still missing.
  std::size_t out_of_order() const noexcept { return beyond_.size(); }

 private:
  std::uint64_t prefix_ = 0;
  std::set<std::uint64_t> beyond_;
};

}  // namespace pickle::comm
