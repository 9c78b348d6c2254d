// The software switch's thread: reads datagrams, adds each worker's chunk into its slot's generation, and sends the
// sum to every worker once all have contributed (switch_protocol.hpp). A single thread, as a switch pipeline is one
// pass per packet: no locks on the aggregates.
#include "switch_server.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "switch_protocol.hpp"

namespace pickle::bench::switchml {
namespace {

/// Room for the datagrams a burst of every slot's chunks makes (256 slots x 8 KiB x a few workers).
constexpr int kSocketBufferBytes = 16 << 20;

UniqueFd bind_any() {
  // IPv6 with IPV6_V6ONLY off takes IPv4 workers too; a host without IPv6 gets an IPv4 socket.
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.valid()) {
    int off = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0) fd.reset();
  }
  if (!fd.valid()) {
    fd = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw SystemError("software switch: socket(UDP) failed", errno);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0) {
      throw SystemError("software switch: bind(UDP, any port) failed", errno);
    }
  }
  int size = kSocketBufferBytes;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                           : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
}

const SoftwareSwitch::Options& validated(const SoftwareSwitch::Options& options) {
  if (options.workers < 1 || options.workers > kMaxWorkers || options.slots < 1) {
    throw InvalidArgument(cat("software switch: ", options.workers, " workers and ", options.slots, " slots (1 to ",
                              kMaxWorkers, " workers, at least 1 slot)"));
  }
  return options;
}

}  // namespace

SoftwareSwitch::SoftwareSwitch(const Options& options)
    : options_(validated(options)),
      fd_(bind_any()),
      port_(bound_port(fd_.get())),
      all_workers_(options.workers == kMaxWorkers ? ~std::uint64_t{0} : (std::uint64_t{1} << options.workers) - 1),
      aggregates_(static_cast<std::size_t>(2 * options.slots)),
      sum_datagram_(sizeof(Header) + kMaxNumel * sizeof(std::uint32_t)),
      workers_(static_cast<std::size_t>(options.workers)) {
  thread_ = std::thread([this] { serve(); });
}

SoftwareSwitch::~SoftwareSwitch() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

int SoftwareSwitch::receive_buffer_bytes() const {
  int size = 0;
  socklen_t length = sizeof size;
  ::getsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, &length);
  return size;
}

SoftwareSwitch::Counters SoftwareSwitch::counters() const {
  return {.received = received_,
          .sent = sent_,
          .dropped = dropped_,
          .duplicates = duplicates_,
          .stale = stale_,
          .malformed = malformed_};
}

bool SoftwareSwitch::drop_now(std::uint64_t& counter) {
  if (options_.drop_every <= 0) return false;
  if (++counter % static_cast<std::uint64_t>(options_.drop_every) != 0) return false;
  ++dropped_;
  return true;
}

void SoftwareSwitch::serve() {
  std::vector<unsigned char> datagram(sizeof(Header) + kMaxNumel * sizeof(std::int32_t) + 1);
  while (!stop_) {
    pollfd ready{.fd = fd_.get(), .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, 50) <= 0) continue;  // wakes up to see stop_
    for (;;) {                                 // every datagram that is there, then poll again
      sockaddr_storage from{};
      socklen_t from_length = sizeof from;
      const ssize_t got = ::recvfrom(fd_.get(), datagram.data(), datagram.size(), MSG_DONTWAIT,
                                     reinterpret_cast<sockaddr*>(&from), &from_length);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) break;  // drained, or an ICMP error from a worker that left: nothing to do
      ++received_;
      if (drop_now(receive_drop_count_)) continue;
      handle(datagram.data(), static_cast<std::size_t>(got), from, from_length);
    }
  }
}

void SoftwareSwitch::handle(const unsigned char* datagram, std::size_t bytes, const sockaddr_storage& from,
                            socklen_t from_length) {
  Header h;
  if (bytes < sizeof h) {
    ++malformed_;
    return;
  }
  std::memcpy(&h, datagram, sizeof h);
  if (h.magic != kMagic || h.numel == 0 || h.numel > kMaxNumel || bytes != sizeof h + h.numel * sizeof(std::int32_t) ||
      h.slot >= static_cast<std::uint32_t>(options_.slots) || h.worker >= options_.workers) {
    ++malformed_;
    return;
  }
  workers_[h.worker] = {.address = from, .length = from_length};
  Aggregate& a = aggregates_[2 * h.slot + h.round % 2];
  const std::uint64_t bit = std::uint64_t{1} << h.worker;
  const unsigned char* payload = datagram + sizeof h;
  if (a.round == static_cast<std::int64_t>(h.round)) {
    if (a.done) {  // its sum was lost on the way back: send it again
      ++duplicates_;
      send_sum(pack_sum(a, h.slot), h.worker);
      return;
    }
    if ((a.arrived & bit) != 0 || a.numel != h.numel || a.offset != h.offset) {
      ++((a.arrived & bit) != 0 ? duplicates_ : malformed_);
      return;
    }
    for (std::size_t i = 0; i < h.numel; ++i) {
      std::uint32_t value;
      std::memcpy(&value, payload + i * sizeof value, sizeof value);
      a.sum[i] += value;
    }
  } else if (a.round < static_cast<std::int64_t>(h.round)) {
    // A new round of this generation: every worker has the sum of the round it held (see switch_protocol.hpp).
    a.round = h.round;
    a.offset = h.offset;
    a.numel = h.numel;
    a.done = false;
    a.sum.resize(h.numel);
    std::memcpy(a.sum.data(), payload, h.numel * sizeof(std::uint32_t));
    a.arrived = 0;
  } else {
    ++stale_;
    return;
  }
  a.arrived |= bit;
  if (a.arrived != all_workers_) return;
  a.done = true;
  const std::size_t length = pack_sum(a, h.slot);  // once, for every worker
  for (int w = 0; w < options_.workers; ++w) send_sum(length, w);
}

std::size_t SoftwareSwitch::pack_sum(const Aggregate& a, std::uint32_t slot) {
  Header h;
  h.slot = slot;
  h.round = static_cast<std::uint32_t>(a.round);
  h.offset = a.offset;
  h.worker = static_cast<std::uint16_t>(options_.workers);
  h.numel = a.numel;
  std::memcpy(sum_datagram_.data(), &h, sizeof h);
  std::memcpy(sum_datagram_.data() + sizeof h, a.sum.data(), a.numel * sizeof(std::uint32_t));
  return sizeof h + a.numel * sizeof(std::uint32_t);
}

void SoftwareSwitch::send_sum(std::size_t bytes, int worker) {
  const Address& to = workers_[static_cast<std::size_t>(worker)];
  if (to.length == 0) return;  // cannot happen once it contributed; a resend will find it
  if (drop_now(send_drop_count_)) return;
  // A full socket buffer loses the datagram as the network would: the worker resends and gets it again.
  if (::sendto(fd_.get(), sum_datagram_.data(), bytes, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to.address),
               to.length) > 0) {
    ++sent_;
  }
}

}  // namespace pickle::bench::switchml
