// net_stream_probe: how fast N connections move data over loopback, below pickle and NCCL: plain TCP streams (what
// NCCL's Socket transport sends through, one per socket) and libfabric endpoint pairs (what one lane of pickle's net
// transport is: an RDM endpoint, tcp;ofi_rxm by default, taking RMA writes of `chunk` bytes, `inflight` outstanding).
// Each connection has a sending and a receiving thread, as two processes would; the receiving side only drives its
// endpoint's progress (fi_cq_read), as pickle's progress thread does. If one endpoint pair moves no more than pickle's
// one lane while one TCP stream moves what NCCL's one socket does, the one-lane gap of issue 8 is the provider's, not
// the transport's (docs/results/2026-11-28c-h200x4.md).
//
// Usage: net_stream_probe [seconds=3] [chunk=1M] [inflight=4] [pairs=1,2,4] [provider=tcp] [iface=lo]
//                         [footprint=SOURCE[/TARGET]] [fill=cpu|ce]
// footprint: the bytes the sending and the receiving side cycle through, chunk by chunk (default chunk x inflight on
// both sides, which stays in the CPU's caches; 1G makes every chunk come from or land in memory, as a large
// message's does; 1G/4M is a large source written into a small ring at the receiver).
// fill: who writes a chunk's source bytes. cpu: the probe, once, before the run; ce: the copy engine, just before each
// write (cudaMemcpyAsync from GPU memory into the pinned source, waited for), as a staged send's ring would: do such
// bytes come out of the CPU's caches as the CPU's own do? (docs/results/2026-11-28d-h200x2.md, the send ring.)
// Output: one line per (kind, pairs): GB/s (1e9 B/s) summed over the pairs, bytes received over the receivers' time.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "probe_args.hpp"
#include "probe_check.hpp"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "net_stream_probe: %s\n", what.c_str());
  std::exit(1);
}

void check_fi(int rc, const char* what) {
  if (rc != 0) fail(std::string(what) + ": " + fi_strerror(-rc));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// --- plain TCP: one stream per pair, 127.0.0.1

/// Bytes per second one stream moved: the receiver's bytes over its time from the first byte to end of stream.
struct Footprint {
  std::size_t source = 0;  // bytes the sender's chunks come from, in turn
  std::size_t target = 0;  // bytes the receiver's chunks land in, in turn
};

/// With fill=ce: copies `chunk` bytes from GPU memory into a place of the (pinned) source just before it is written.
class CopyEngineFill {
 public:
  CopyEngineFill(char* source, std::size_t source_bytes, std::size_t chunk) : source_(source), chunk_(chunk) {
    probe::check(cudaHostRegister(source, source_bytes, cudaHostRegisterDefault), "cudaHostRegister");
    probe::check(cudaMalloc(&device_, chunk), "cudaMalloc");
    probe::check(cudaMemset(device_, 'y', chunk), "cudaMemset");
    probe::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CopyEngineFill() {
    cudaStreamDestroy(stream_);
    cudaFree(device_);
    cudaHostUnregister(source_);
  }
  CopyEngineFill(const CopyEngineFill&) = delete;
  CopyEngineFill& operator=(const CopyEngineFill&) = delete;
  void fill(std::size_t offset) {
    probe::check(cudaMemcpyAsync(source_ + offset, device_, chunk_, cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync");
    probe::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  char* source_;
  std::size_t chunk_;
  void* device_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

double tcp_stream(double seconds, std::size_t chunk, Footprint footprint) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 1) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    fail(std::string("tcp listener: ") + std::strerror(errno));
  }
  double rate = 0;
  std::thread receiver([&] {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) fail(std::string("accept: ") + std::strerror(errno));
    std::vector<char> buffer(footprint.target);
    std::size_t total = 0;
    Clock::time_point first{};
    for (;;) {
      // Chunk by chunk through the footprint.
      const std::size_t at = (total / chunk % (footprint.target / chunk)) * chunk;
      const ssize_t got = recv(fd, buffer.data() + at + total % chunk, chunk - total % chunk, 0);
      if (got < 0) fail(std::string("recv: ") + std::strerror(errno));
      if (got == 0) break;
      if (total == 0) first = Clock::now();
      total += static_cast<std::size_t>(got);
    }
    rate = static_cast<double>(total) / seconds_since(first);
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    fail(std::string("connect: ") + std::strerror(errno));
  }
  std::vector<char> data(footprint.source, 'x');
  const auto start = Clock::now();
  for (std::size_t next = 0; seconds_since(start) < seconds; ++next) {
    const char* source = data.data() + (next % (footprint.source / chunk)) * chunk;
    for (std::size_t sent = 0; sent < chunk;) {
      const ssize_t n = send(fd, source + sent, chunk - sent, 0);
      if (n < 0) fail(std::string("send: ") + std::strerror(errno));
      sent += static_cast<std::size_t>(n);
    }
  }
  shutdown(fd, SHUT_WR);
  receiver.join();
  close(fd);
  close(listener);
  return rate;
}

// --- libfabric: one RDM endpoint pair per connection, as one lane of pickle's net transport

struct Side {
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* mr = nullptr;
  // Page-aligned (cudaHostRegister with fill=ce pins whole pages: two pairs' buffers must not share one).
  std::unique_ptr<char, decltype(&std::free)> buffer{nullptr, &std::free};
  fi_addr_t peer = FI_ADDR_UNSPEC;

  void open(fi_info* info, std::size_t bytes, std::uint64_t access) {  // `bytes`: the registered buffer
    check_fi(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
    check_fi(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    check_fi(fi_av_open(domain, &av_attr, &av, nullptr), "fi_av_open");
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.size = 1024;
    check_fi(fi_cq_open(domain, &cq_attr, &cq, nullptr), "fi_cq_open");
    check_fi(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
    check_fi(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
    check_fi(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    check_fi(fi_enable(ep), "fi_enable");
    constexpr std::size_t kPage = 4096;
    buffer.reset(static_cast<char*>(std::aligned_alloc(kPage, (bytes + kPage - 1) / kPage * kPage)));
    if (!buffer) fail("out of memory for a " + std::to_string(bytes) + "-byte buffer");
    std::memset(buffer.get(), 'x', bytes);
    check_fi(fi_mr_reg(domain, buffer.get(), bytes, access, 0, 0, 0, &mr, nullptr), "fi_mr_reg");
  }
  std::vector<char> name() const {
    std::vector<char> address(256);
    std::size_t length = address.size();
    check_fi(fi_getname(&ep->fid, address.data(), &length), "fi_getname");
    address.resize(length);
    return address;
  }
  void insert(const std::vector<char>& address) {
    if (fi_av_insert(av, address.data(), 1, &peer, 0, nullptr) != 1) fail("fi_av_insert failed");
  }
  void close() {
    for (fid* object : {&mr->fid, &ep->fid, &cq->fid, &av->fid, &domain->fid, &fabric->fid}) fi_close(object);
  }
};

fi_info* choose_info(const std::string& provider, const std::string& iface) {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = strdup(provider.c_str());
  fi_info* list = nullptr;
  check_fi(fi_getinfo(FI_VERSION(1, 10), nullptr, nullptr, 0, hints, &list), "fi_getinfo");
  fi_freeinfo(hints);
  for (fi_info* info = list; info != nullptr; info = info->next) {
    if (iface.empty() || (info->domain_attr->name != nullptr && iface == info->domain_attr->name)) {
      fi_info* chosen = fi_dupinfo(info);
      fi_freeinfo(list);
      return chosen;
    }
  }
  fail("no " + provider + " endpoint on interface " + iface);
}

/// Bytes per second one endpoint pair moved: `inflight` RMA writes of `chunk` bytes kept outstanding for `seconds`,
/// counted by their completions at the sender, over the sender's time from the first post to the last completion.
double fabric_pair(fi_info* info, double seconds, std::size_t chunk, int inflight, Footprint footprint, bool ce_fill) {
  Side sender, target;
  // Chunk-sized places the writes take their bytes from and put them into, in turn.
  const std::size_t source_places = footprint.source / chunk, target_places = footprint.target / chunk;
  std::size_t next_write = 0;
  sender.open(info, footprint.source, FI_WRITE);
  target.open(info, footprint.target, FI_REMOTE_WRITE);
  sender.insert(target.name());
  target.insert(sender.name());
  std::optional<CopyEngineFill> filler;
  if (ce_fill) filler.emplace(sender.buffer.get(), footprint.source, chunk);
  const std::uint64_t key = fi_mr_key(target.mr);
  // Virtual addresses where the provider asks for them, else offsets into the registration (tcp in libfabric 1.17).
  const bool virtual_address = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  const std::uint64_t remote = virtual_address ? reinterpret_cast<std::uint64_t>(target.buffer.get()) : 0;
  std::atomic<bool> stop{false};
  std::thread progress([&] {  // the target's side: its provider moves the bytes in only while it is polled
    fi_cq_data_entry entries[16];
    while (!stop.load(std::memory_order_relaxed)) (void)fi_cq_read(target.cq, entries, 16);
  });
  std::vector<fi_context2> contexts(static_cast<std::size_t>(inflight));
  // A write the provider refused for now (-FI_EAGAIN: its queue is full) is retried after the next completions: the
  // sender's provider progresses only inside fi_cq_read.
  std::vector<int> refused;
  // The places advance only with writes the provider took (one endpoint completes its writes in order, and at most
  // `inflight` are out, so a place comes round again only after its last write completed); a refused write is retried
  // at the same places.
  auto post = [&](int slot) {
    const std::size_t from = (next_write % source_places) * chunk, to = (next_write % target_places) * chunk;
    if (filler) filler->fill(from);
    const ssize_t rc = fi_write(sender.ep, sender.buffer.get() + from, chunk, fi_mr_desc(sender.mr), target.peer,
                                remote + to, key, &contexts[static_cast<std::size_t>(slot)]);
    if (rc == -FI_EAGAIN) {
      refused.push_back(slot);
      return;
    }
    if (rc != 0) check_fi(static_cast<int>(rc), "fi_write");
    ++next_write;
  };
  const auto start = Clock::now();
  for (int slot = 0; slot < inflight; ++slot) post(slot);
  std::size_t done = 0;
  int outstanding = inflight;  // posted or refused, not yet completed
  while (outstanding > 0) {
    const bool more = seconds_since(start) < seconds;
    std::vector<int> retry;
    retry.swap(refused);
    for (int slot : retry) {
      if (more) {
        post(slot);
      } else {
        --outstanding;  // never went out
      }
    }
    fi_cq_data_entry entries[16];
    const ssize_t n = fi_cq_read(sender.cq, entries, 16);
    if (n == -FI_EAGAIN) continue;
    if (n < 0) {
      fi_cq_err_entry error{};
      fi_cq_readerr(sender.cq, &error, 0);
      fail(std::string("fi_write completion: ") + fi_strerror(error.err));
    }
    for (ssize_t i = 0; i < n; ++i) {
      done += chunk;
      const int slot = static_cast<int>(static_cast<fi_context2*>(entries[i].op_context) - contexts.data());
      if (more) {
        post(slot);
      } else {
        --outstanding;
      }
    }
  }
  const double rate = static_cast<double>(done) / seconds_since(start);
  stop = true;
  progress.join();
  sender.close();
  target.close();
  return rate;
}

/// `pairs` runs of `one` at once, each on threads of its own: the sum of their rates.
template <class One>
double together(int pairs, One one) {
  std::vector<double> rates(static_cast<std::size_t>(pairs));
  std::vector<std::thread> threads;
  for (int p = 0; p < pairs; ++p) threads.emplace_back([&, p] { rates[static_cast<std::size_t>(p)] = one(); });
  for (auto& thread : threads) thread.join();
  double sum = 0;
  for (double rate : rates) sum += rate;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const std::size_t chunk = argc > 2 ? probe::parse_bytes(argv[2]) : std::size_t{1} << 20;
  const int inflight = argc > 3 ? std::atoi(argv[3]) : 4;
  const std::vector<int> pairs = probe::parse_ints(argc > 4 ? argv[4] : "1,2,4");
  const std::string provider = argc > 5 ? argv[5] : "tcp";
  const std::string iface = argc > 6 ? argv[6] : "lo";
  const std::size_t in_flight_bytes = chunk * static_cast<std::size_t>(std::max(inflight, 1));
  Footprint footprint{in_flight_bytes, in_flight_bytes};
  if (argc > 7) {
    const std::string text = argv[7];
    const std::size_t slash = text.find('/');
    footprint.source = probe::parse_bytes(text.substr(0, slash));
    footprint.target = slash == std::string::npos ? footprint.source : probe::parse_bytes(text.substr(slash + 1));
  }
  const std::string fill = argc > 8 ? argv[8] : "cpu";
  if (seconds <= 0 || chunk == 0 || inflight < 1 || pairs.empty() || footprint.source < in_flight_bytes ||
      footprint.target < in_flight_bytes || (fill != "cpu" && fill != "ce")) {
    fail("usage: net_stream_probe [seconds=3] [chunk=1M] [inflight=4] [pairs=1,2,4] [provider=tcp] [iface=lo] "
         "[footprint=SOURCE[/TARGET], each >= chunk x inflight] [fill=cpu|ce]");
  }
  fi_info* info = choose_info(provider, iface);
  std::printf("# net_stream_probe: %.1f s per run, chunk %zu B, %d writes in flight per endpoint, chunks from %zu B "
              "into %zu B, source filled by the %s; libfabric %s on %s\n",
              seconds, chunk, inflight, footprint.source, footprint.target,
              fill == "ce" ? "copy engine (fabric pairs)" : "CPU", info->fabric_attr->prov_name,
              info->domain_attr->name);
  for (int n : pairs) {
    const double tcp = together(n, [&] { return tcp_stream(seconds, chunk, footprint); });
    std::printf("tcp     %d stream(s)        %8.2f GB/s\n", n, tcp / 1e9);
    const double fabric =
        together(n, [&] { return fabric_pair(info, seconds, chunk, inflight, footprint, fill == "ce"); });
    std::printf("fabric  %d endpoint pair(s) %8.2f GB/s\n", n, fabric / 1e9);
    std::fflush(stdout);
  }
  fi_freeinfo(info);
  return 0;
}
