#include "delay_link.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

namespace pickle::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string error_text(const std::string& what) { return what + ": " + std::strerror(errno); }

/// Enters network namespace `ns` (this thread only) and opens TUN device `iface` there; -1 and `*why_not` if not.
int open_tun_in(const std::string& ns, const std::string& iface, std::string* why_not) {
  if (!enter_network_namespace(ns, why_not)) return -1;
  const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why_not = error_text("cannot open /dev/net/tun");
    return -1;
  }
  struct ifreq request {};
  request.ifr_flags = IFF_TUN | IFF_NO_PI;  // bare IP packets, no ARP: nothing but what the ranks send
  std::strncpy(request.ifr_name, iface.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd, TUNSETIFF, &request) != 0) {
    *why_not = error_text("TUNSETIFF " + iface + " in " + ns);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool enter_network_namespace(const std::string& ns, std::string* why_not) {
  int ns_fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) ns_fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) {
    *why_not = error_text("cannot open network namespace " + ns);
    return false;
  }
  const bool entered = ::setns(ns_fd, CLONE_NEWNET) == 0;
  if (!entered) *why_not = error_text("setns into " + ns);
  ::close(ns_fd);
  return entered;
}

std::unique_ptr<DelayLink> DelayLink::create(const std::string ns[2], const std::string iface[2],
                                             std::chrono::microseconds delay, double loss, std::string* why_not) {
  std::unique_ptr<DelayLink> link(new DelayLink());
  link->delay_ = delay;
  link->loss_ = loss;
  // setns changes the calling thread's namespace: a thread of its own does it and ends, and the devices stay where
  // they were made, bound to their descriptors.
  std::string failure;
  std::thread maker([&] {
    for (int side = 0; side < 2 && failure.empty(); ++side) {
      link->tun_[side] = open_tun_in(ns[side], iface[side], &failure);
    }
  });
  maker.join();
  if (!failure.empty()) {
    *why_not = failure;
    return nullptr;  // the destructor closes what was opened
  }
  link->wake_ = ::eventfd(0, EFD_CLOEXEC);
  if (link->wake_ < 0) {
    *why_not = error_text("eventfd");
    return nullptr;
  }
  link->thread_ = std::thread([raw = link.get()] { raw->carry(); });
  return link;
}

DelayLink::~DelayLink() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(wake_, &one, sizeof one);
    thread_.join();
  }
  // Closing a TUN descriptor removes its device (none is persistent).
  for (int fd : {tun_[0], tun_[1], wake_}) {
    if (fd >= 0) ::close(fd);
  }
}

void DelayLink::carry() {
  struct Packet {
    Clock::time_point due;
    std::vector<char> bytes;
  };
  std::deque<Packet> waiting[2];  // waiting[side]: what side sent, in order, until it is due at the other side
  std::mt19937_64 dice(std::random_device{}());
  std::uniform_real_distribution<double> roll(0.0, 1.0);
  std::vector<char> buffer(65536);
  bool readable[2] = {true, true};
  for (;;) {
    const Clock::time_point now = Clock::now();
    for (int side = 0; side < 2; ++side) {
      auto& queue = waiting[side];
      for (; !queue.empty() && queue.front().due <= now; queue.pop_front()) {
        // A failed write (the other side's device is down: NetnsPair::cut) loses the packet, as a cut cable does.
        if (::write(tun_[1 - side], queue.front().bytes.data(), queue.front().bytes.size()) > 0) ++carried_[side];
      }
    }
    // Sleep until a packet arrives, the next one is due, or the destructor wakes us.
    Clock::time_point next_due = Clock::time_point::max();
    for (const auto& queue : waiting) {
      if (!queue.empty() && queue.front().due < next_due) next_due = queue.front().due;
    }
    struct timespec timeout {};
    if (next_due != Clock::time_point::max()) {
      const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(next_due - Clock::now());
      const long long ns = wait.count() > 0 ? wait.count() : 0;
      timeout.tv_sec = static_cast<time_t>(ns / 1000000000);
      timeout.tv_nsec = static_cast<long>(ns % 1000000000);
    }
    struct pollfd fds[3] = {{readable[0] ? tun_[0] : -1, POLLIN, 0},
                            {readable[1] ? tun_[1] : -1, POLLIN, 0},
                            {wake_, POLLIN, 0}};
    if (::ppoll(fds, 3, next_due == Clock::time_point::max() ? nullptr : &timeout, nullptr) < 0 && errno != EINTR) {
      // Nothing crosses the link from here on: say so, or the test that hangs on it would not know why.
      std::fprintf(stderr, "delay link: ppoll failed (%s): the link carries nothing from now on\n",
                   std::strerror(errno));
      return;
    }
    if (fds[2].revents != 0) return;
    for (int side = 0; side < 2; ++side) {
      if ((fds[side].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) readable[side] = false;  // device gone
      if ((fds[side].revents & POLLIN) == 0) continue;
      // A bounded batch per side, so that one busy direction cannot starve the other or the deliveries.
      for (int batch = 0; batch < 64; ++batch) {
        const ssize_t size = ::read(tun_[side], buffer.data(), buffer.size());
        if (size <= 0) break;  // EAGAIN: drained
        if (roll(dice) < loss_) {
          ++dropped_[side];
        } else if (waiting[side].size() >= static_cast<std::size_t>(kQueueLimit)) {
          ++overflowed_[side];
        } else {
          waiting[side].push_back({Clock::now() + delay_, std::vector<char>(buffer.data(), buffer.data() + size)});
        }
      }
    }
  }
}

}  // namespace pickle::test
