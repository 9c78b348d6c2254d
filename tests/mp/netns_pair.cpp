#include "netns_pair.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "core/env.hpp"
#include "delay_link.hpp"
#include "subprocess.hpp"

namespace pickle::test {
namespace {

/// PATH first (scripts/device/carry_netns_tools.sh puts packed tools there on a machine without them), then the
/// system folders, which a test's PATH often lacks (sbin).
std::string find_tool(const std::string& name) {
  std::vector<std::string> dirs;
  for (const std::string& dir : env::path_folders()) {
    // Absolute folders only: a relative one (".") would run whatever the test's working folder holds, as root.
    if (dir.front() == '/') dirs.push_back(dir);
  }
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) dirs.emplace_back(dir);
  for (const auto& dir : dirs) {
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

/// Runs a command to completion (at most 20 s); its output goes to `output`.
bool run(const std::vector<std::string>& argv, std::string* output = nullptr) {
  TempDir dir("netns");
  pid_t pid = spawn_program(argv, {}, dir / "out", dir / "out");
  ExitStatus status = wait_pid_or_kill(pid, std::chrono::seconds(20));
  if (output != nullptr) *output = read_file(dir / "out");
  return status.ok();
}

/// Whether this kernel has netem: a netem qdisc put on, then taken off, namespace side 0's loopback.
bool kernel_has_netem(const NetnsPair& pair, const std::string& tc) {
  if (!run(pair.exec_in(0, {tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"}))) return false;
  run(pair.exec_in(0, {tc, "qdisc", "del", "dev", "lo", "root"}));
  return true;
}

}  // namespace

std::unique_ptr<NetnsPair> NetnsPair::create(std::string* why_not, bool impaired) {
  if (::geteuid() != 0) {
    *why_not = "network namespaces need root";
    return nullptr;
  }
  std::unique_ptr<NetnsPair> pair(new NetnsPair());
  pair->ip_ = find_tool("ip");
  if (pair->ip_.empty()) {
    *why_not = "iproute2 (the ip command) is not installed";
    return nullptr;
  }
  const std::string tag = std::to_string(::getpid());
  for (int side = 0; side < 2; ++side) {
    pair->ns_[side] = "pickle-net-" + tag + (side == 0 ? "a" : "b");
    pair->iface_[side] = "pk" + tag + (side == 0 ? "a" : "b");  // at most 15 characters
    std::string output;
    if (!run({pair->ip_, "netns", "add", pair->ns_[side]}, &output)) {
      *why_not = "ip netns add failed: " + output;
      return nullptr;
    }
    pair->made_ = side + 1;
  }
  const std::string& ip = pair->ip_;
  const std::string tc = find_tool("tc");
  // The impairment decides the link: netem on a veth pair where the kernel has netem (probed on a namespace's
  // loopback), else the user-space delay link over TUN, else a veth pair whose TCP packets nftables drops.
  const bool netem = impaired && !tc.empty() && kernel_has_netem(*pair, tc);
  std::string no_delay_link;
  if (impaired && !netem) {
    pair->delay_link_ = DelayLink::create(pair->ns_, pair->iface_, std::chrono::milliseconds(1), 0.01, &no_delay_link);
  }
  std::vector<std::vector<std::string>> steps;
  if (!pair->delay_link_) {
    steps = {{ip, "link", "add", pair->iface_[0], "type", "veth", "peer", "name", pair->iface_[1]},
             {ip, "link", "set", pair->iface_[0], "netns", pair->ns_[0]},
             {ip, "link", "set", pair->iface_[1], "netns", pair->ns_[1]}};
  }
  for (int side = 0; side < 2; ++side) {
    const std::vector<std::string> in_ns = {ip, "-n", pair->ns_[side]};
    const auto step = [&](std::vector<std::string> words) {
      words.insert(words.begin(), in_ns.begin(), in_ns.end());
      steps.push_back(words);
    };
    step({"addr", "add", pair->address(side) + "/24", "dev", pair->iface_[side]});
    // TUN's default MTU (1500) would make the delay link's thread carry a packet per 1.5 KB; a veth pair with GSO
    // hands netem packets of up to 64 KB, and the delay link now sees the same.
    if (pair->delay_link_) step({"link", "set", pair->iface_[side], "mtu", "65000"});
    step({"link", "set", pair->iface_[side], "up"});
    step({"link", "set", "lo", "up"});
  }
  for (const auto& step : steps) {
    std::string output;
    if (!run(step, &output)) {
      std::string command;
      for (const auto& word : step) command += word + " ";
      *why_not = "could not build the link (" + command + "): " + output;
      return nullptr;
    }
  }
  if (!impaired) {
    pair->impairment_ = "none (asked for a plain link)";
    return pair;
  }
  if (netem) {
    for (int side = 0; side < 2; ++side) {
      std::string output;
      if (!run(pair->exec_in(side, {tc, "qdisc", "add", "dev", pair->iface_[side], "root", "netem", "delay", "1ms",
                                    "loss", "1%"}),
               &output)) {
        *why_not = "tc qdisc add netem failed on " + pair->iface_[side] + ": " + output;
        return nullptr;
      }
    }
    pair->impairment_ = "netem delay 1ms loss 1%";
    pair->kind_ = Impairment::Netem;
    return pair;
  }
  if (pair->delay_link_) {
    pair->impairment_ = "delay 1ms loss 1% by a user-space link over TUN (this kernel has no netem)";
    pair->kind_ = Impairment::DelayLink;
    return pair;
  }
  const std::string nft = find_tool("nft");
  bool dropped = !nft.empty();
  for (int side = 0; side < 2 && dropped; ++side) {
    dropped = run(pair->exec_in(side, {nft, "add", "table", "inet", "pickle"})) &&
              run(pair->exec_in(side, {nft, "add", "chain", "inet", "pickle", "out",
                                       "{ type filter hook output priority 0 ; }"})) &&
              run(pair->exec_in(side, {nft, "add", "rule", "inet", "pickle", "out", "meta", "l4proto", "tcp",
                                       "numgen", "random", "mod", "100", "<", "1", "counter", "drop"}));
  }
  if (dropped) pair->kind_ = Impairment::Nftables;
  const std::string no_delay = "this kernel has no netem and no delay link (" + no_delay_link + ")";
  pair->impairment_ = dropped ? "nftables drops 1% of TCP packets (" + no_delay + ": no added delay)"
                              : "none (" + no_delay + ", and nftables is missing)";
  return pair;
}

std::vector<std::string> NetnsPair::exec_in(int side, const std::vector<std::string>& command) const {
  std::vector<std::string> argv = {ip_, "netns", "exec", ns_[side]};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

bool NetnsPair::cut(int side) const { return run({ip_, "-n", ns_[side], "link", "set", iface_[side], "down"}); }

std::string NetnsPair::drops() const {
  if (kind_ == Impairment::None) return "nothing drops packets";
  std::string report;
  if (kind_ == Impairment::DelayLink) {
    for (int side = 0; side < 2; ++side) {
      report += (side == 0 ? "" : ", ") + ("side " + std::to_string(side) + ": " +
                                           std::to_string(delay_link_->dropped(side)) + " of " +
                                           std::to_string(delay_link_->dropped(side) + delay_link_->carried(side)) +
                                           " dropped");
      if (delay_link_->overflowed(side) != 0) {
        report += " and " + std::to_string(delay_link_->overflowed(side)) + " by a full queue";
      }
    }
    return report;
  }
  for (int side = 0; side < 2; ++side) {
    std::string output;
    const bool ok = kind_ == Impairment::Netem
                        ? run(exec_in(side, {find_tool("tc"), "-s", "qdisc", "show", "dev", iface_[side]}), &output)
                        : run(exec_in(side, {find_tool("nft"), "list", "chain", "inet", "pickle", "out"}), &output);
    // netem: "... dropped 12, ..."; nftables: "... counter packets 12 bytes 3456 drop".
    const std::string marker = kind_ == Impairment::Netem ? "dropped " : "packets ";
    const auto at = output.find(marker);
    std::string count = "?";
    if (ok && at != std::string::npos) {
      const auto start = at + marker.size();
      count = output.substr(start, output.find_first_not_of("0123456789", start) - start);
    }
    report += (side == 0 ? "" : ", ") + ("side " + std::to_string(side) + ": " + count + " dropped");
  }
  return report;
}

NetnsPair::~NetnsPair() {
  // The delay link's devices go with its descriptors, before their namespaces; deleting a namespace destroys the
  // veth end inside it, and with it the peer end.
  delay_link_.reset();
  for (int side = 0; side < made_; ++side) run({ip_, "netns", "del", ns_[side]});
}

}  // namespace pickle::test
