// A software switch's worker: keeps one chunk in flight per slot (chunk c in slot c % slots), sends the slot's next
// chunk when the sum of its current one comes back, and resends a chunk whose sum is late (switch_protocol.hpp).
#include "switch_worker.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "switch_protocol.hpp"

namespace pickle::bench::switchml {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

const SwitchWorker::Options& validated(const SwitchWorker::Options& options) {
  if (options.numel < 1 || static_cast<std::size_t>(options.numel) > kMaxNumel || options.slots < 1) {
    throw InvalidArgument(cat("software switch worker: ", options.numel, " elements per packet and ", options.slots,
                              " slots (1 to ", kMaxNumel, " elements, at least 1 slot)"));
  }
  return options;
}

SwitchWorker::SwitchWorker(const std::string& host, int port, const Options& options)
    : options_(validated(options)), rounds_(static_cast<std::size_t>(options.slots), 0) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0 || found == nullptr) {
    throw InvalidArgument(
        cat("software switch worker: cannot resolve the switch's host '", host, "': ", gai_strerror(rc)));
  }
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  fd_ = UniqueFd(::socket(pick->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int error = errno;
  std::memcpy(&switch_, pick->ai_addr, pick->ai_addrlen);
  switch_length_ = static_cast<socklen_t>(pick->ai_addrlen);
  ::freeaddrinfo(found);
  switch_address_ = cat(host, ":", port);
  if (!fd_.valid()) throw SystemError(cat("software switch worker: no UDP socket for ", switch_address_), error);
  int size = 16 << 20;
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

void SwitchWorker::allreduce(std::int32_t* data, std::size_t count, double timeout_s, const std::string& what) {
  const std::size_t numel = static_cast<std::size_t>(options_.numel);
  const std::size_t chunks = (count + numel - 1) / numel;
  const std::size_t slots = std::min<std::size_t>(static_cast<std::size_t>(options_.slots), chunks);
  struct InFlight {
    std::size_t chunk = 0;  // the slot is done once this passes the last chunk
    Clock::time_point sent;
  };
  std::vector<InFlight> flight(slots);
  std::vector<unsigned char> packet(sizeof(Header) + kMaxNumel * sizeof(std::int32_t));

  auto send_chunk = [&](std::size_t slot) {
    const std::size_t chunk = flight[slot].chunk;
    Header h;
    h.slot = static_cast<std::uint32_t>(slot);
    h.round = rounds_[slot];
    h.offset = static_cast<std::uint32_t>(chunk * numel);
    h.worker = static_cast<std::uint16_t>(options_.worker);
    h.numel = static_cast<std::uint16_t>(std::min(numel, count - chunk * numel));
    std::memcpy(packet.data(), &h, sizeof h);
    std::memcpy(packet.data() + sizeof h, data + h.offset, h.numel * sizeof(std::int32_t));
    // A full socket buffer drops it as a network would: the resend below covers it.
    (void)::sendto(fd_.get(), packet.data(), sizeof h + h.numel * sizeof(std::int32_t), MSG_DONTWAIT,
                   reinterpret_cast<const sockaddr*>(&switch_), switch_length_);
    flight[slot].sent = Clock::now();
  };

  for (std::size_t s = 0; s < slots; ++s) {
    flight[s] = {.chunk = s, .sent = {}};
    send_chunk(s);
  }
  std::size_t finished = 0;
  auto progress = Clock::now();  // the last sum that came back
  std::vector<unsigned char> datagram(packet.size() + 1);
  while (finished < chunks) {
    pollfd ready{.fd = fd_.get(), .events = POLLIN, .revents = 0};
    const int waiting = ::poll(&ready, 1, 1);
    while (waiting > 0) {
      const ssize_t got = ::recv(fd_.get(), datagram.data(), datagram.size(), MSG_DONTWAIT);
      if (got < 0) break;                                        // drained
      if (got < static_cast<ssize_t>(sizeof(Header))) continue;  // not the switch's
      Header h;
      std::memcpy(&h, datagram.data(), sizeof h);
      if (h.magic != kMagic || h.slot >= slots || flight[h.slot].chunk >= chunks || h.round != rounds_[h.slot] ||
          static_cast<std::size_t>(got) != sizeof h + h.numel * sizeof(std::int32_t) ||
          h.offset != flight[h.slot].chunk * numel) {
        continue;  // a repeated sum of a chunk this worker has finished
      }
      std::memcpy(data + h.offset, datagram.data() + sizeof h, h.numel * sizeof(std::int32_t));
      ++finished;
      progress = Clock::now();
      ++rounds_[h.slot];
      flight[h.slot].chunk += slots;
      if (flight[h.slot].chunk < chunks) send_chunk(h.slot);
    }
    const auto now = Clock::now();
    const auto resend_after = std::chrono::duration<double>(options_.resend_after_s);
    for (std::size_t s = 0; s < slots; ++s) {
      if (flight[s].chunk < chunks && now - flight[s].sent > resend_after) {
        ++resends_;
        send_chunk(s);
      }
    }
    if (finished < chunks && std::chrono::duration<double>(now - progress).count() > timeout_s) {
      throw TimeoutError(cat(what, ": the software switch at ", switch_address_, " returned no sum for ", timeout_s,
                             " s, with the sums of ", finished, " of ", chunks, " chunks in (", resends_,
                             " resends): the switch or another worker is gone or never came"));
    }
  }
}

}  // namespace pickle::bench::switchml
