#pragma once
// A link between two network namespaces that delays every packet and drops a random share of them, for kernels built
// without netem (the device machine's and this one's: CONFIG_NET_SCH_NETEM is not set). A TUN device in each
// namespace, and a thread of this process that reads each packet one side sends and writes it into the other side
// once `delay` has passed, unless the dice drop it: netem's "delay D loss P" done in user space.
//
// The thread keeps the packets of each direction in arrival order (one fixed delay cannot reorder them) and holds at
// most `kQueueLimit` per direction, like netem's default limit of 1000: beyond that it drops, as a full queue does.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace pickle::test {

/// Moves the calling thread (only it) into network namespace `ns`, as `ip netns` names it (/run/netns/NAME).
bool enter_network_namespace(const std::string& ns, std::string* why_not);

class DelayLink {
 public:
  static constexpr int kQueueLimit = 1000;

  /// Makes TUN device `iface[side]` inside namespace `ns[side]` (named as `ip netns` names it, /run/netns/NAME) for
  /// both sides and starts carrying packets between them; addresses and "up" are the caller's (`ip -n`). nullptr
  /// with `*why_not` saying why where it cannot (no /dev/net/tun, no permission).
  static std::unique_ptr<DelayLink> create(const std::string ns[2], const std::string iface[2],
                                           std::chrono::microseconds delay, double loss, std::string* why_not);
  ~DelayLink();
  DelayLink(const DelayLink&) = delete;
  DelayLink& operator=(const DelayLink&) = delete;

  /// Packets that side `side` sent: carried to the other side, dropped by the dice, dropped by a full queue.
  std::uint64_t carried(int side) const { return carried_[side].load(); }
  std::uint64_t dropped(int side) const { return dropped_[side].load(); }
  std::uint64_t overflowed(int side) const { return overflowed_[side].load(); }

 private:
  DelayLink() = default;
  void carry();  // the thread's loop

  int tun_[2] = {-1, -1};
  int wake_ = -1;  // eventfd: wakes the thread to stop
  std::chrono::microseconds delay_{0};
  double loss_ = 0;
  std::atomic<std::uint64_t> carried_[2] = {0, 0}, dropped_[2] = {0, 0}, overflowed_[2] = {0, 0};
  std::thread thread_;
};

}  // namespace pickle::test
