#pragma once
// Two network namespaces joined by a veth pair, made by a test for itself (root and iproute2 needed), so that two
// ranks talk over a real link that the test may impair: netem delay 1 ms and loss 1% where the kernel has netem, else
// the same by a user-space link over TUN (delay_link.hpp), else 1% of TCP packets dropped by nftables (no delay).
// Removed (with the link) on destruction.

#include <memory>
#include <string>
#include <vector>

#include "delay_link.hpp"

namespace pickle::test {

class NetnsPair {
 public:
  /// The pair, or nullptr with `*why_not` saying why it cannot be made here (not root, no iproute2, no namespaces).
  /// `impaired`: the link delays and drops packets (below); false: a plain veth link.
  static std::unique_ptr<NetnsPair> create(std::string* why_not, bool impaired = true);
  ~NetnsPair();
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  const std::string& ns(int side) const { return ns_[side]; }
  const std::string& iface(int side) const { return iface_[side]; }
  std::string address(int side) const { return side == 0 ? "10.77.0.1" : "10.77.0.2"; }
  /// What impairs the link: "netem delay 1ms loss 1%", "delay 1ms loss 1% by a user-space link over TUN (...)",
  /// "nftables drops 1% of TCP packets (...: no added delay)" or "none (...)".
  const std::string& impairment() const { return impairment_; }
  /// Packets the impairment dropped so far, per side ("side 0: 12 dropped, side 1: 9 dropped"), from tc, nft or
  /// the delay link.
  std::string drops() const;
  /// The delay link (nullptr for a veth pair): its counters, for a test of the link itself.
  const DelayLink* delay_link() const { return delay_link_.get(); }
  /// Takes side `side`'s end of the link down: from then on nothing crosses, and nothing says so (no reset, no FIN),
  /// as when that host loses power or the network partitions. True when it worked.
  bool cut(int side) const;
  /// argv that runs `command` inside namespace `side`.
  std::vector<std::string> exec_in(int side, const std::vector<std::string>& command) const;

 private:
  NetnsPair() = default;
  std::string ip_;
  std::string ns_[2], iface_[2];
  int made_ = 0;  // namespaces created so far
  std::string impairment_;
  enum class Impairment { None, Netem, DelayLink, Nftables } kind_ = Impairment::None;
  std::unique_ptr<DelayLink> delay_link_;
};

}  // namespace pickle::test
