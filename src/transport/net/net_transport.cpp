// NetTransport: set-up (provider, rails, address exchange) and the API calls. The rails' threads are in
// rail_progress.cpp, the state they share in net_shared.cpp.
#include "transport/net/net_transport.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string_view>
#include <thread>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/memory.hpp"
#include "transport/net/address_exchange.hpp"
#include "transport/net/net_shared.hpp"
#include "transport/net/provider.hpp"
#include "transport/net/rail.hpp"
#include "transport/net/registration_cache.hpp"

namespace pickle::transport::net {
namespace {

// Receives posted per lane for providers that consume one per remote CQ data (FI_RX_CQ_DATA): enough for every
// write a peer can have in flight on the lane, reposted as they are consumed.
constexpr std::size_t kReceivesPerLane = 256;

// What each lane's set-up handshake writes into the peer's handshake buffer (the bytes themselves are never read).
constexpr std::size_t kHelloBytes = 8;

std::uint64_t chunks_of(std::size_t bytes, std::uint64_t chunk) {
  return bytes == 0 ? 1 : (static_cast<std::uint64_t>(bytes) + chunk - 1) / chunk;
}

// Providers whose data moves by the CPU of the thread that drives them (sockets, memory copies): their lanes each
// get a rail (a domain and a thread) per direction, or more lanes would not move more bytes, and a rank that sends
// and receives at once (a bidirectional exchange, a ring) would split one thread's work between both: between two
// namespaces on 16 cores one thread per lane moved 4.2 GB/s one way and 3.6 GB/s both ways summed
// (docs/results/2026-11-29b-h200.md). NIC providers keep one rail: their queue pairs run in hardware, and one
// registration per allocation matters more there.
bool moves_bytes_by_cpu(const fi_info& info) {
  static const std::set<std::string_view> kCpuProviders = {"tcp", "sockets", "udp", "net", "shm"};
  const std::string_view name = info.fabric_attr->prov_name ? info.fabric_attr->prov_name : "";
  const std::string_view core = name.substr(0, name.find(';'));
  const bool shared_keys = (info.domain_attr->mr_mode & FI_MR_PROV_KEY) == 0;
  return kCpuProviders.count(core) != 0 && shared_keys;
}

}  // namespace

struct NetTransport::Impl {
  int rank = 0;
  NetOptions options;
  std::string description;
  InfoPtr info;
  bool local_mr = false;   // FI_MR_LOCAL: write sources need a registration descriptor
  bool virt_addr = false;  // FI_MR_VIRT_ADDR: remote addresses are virtual addresses, else offsets
  std::unique_ptr<SharedState> shared;
  // The rails that send: lane l is sending[l % R], lane l / R within it. With directional rails, `landing` has as
  // many again, laid out alike, into which the peers' writes come; without, the sending rails take them too.
  std::vector<Rail*> sending;
  std::vector<Rail*> landing;
  std::vector<std::unique_ptr<Rail>> rails;  // all of them, sending first
  std::unique_ptr<RegistrationCache> registrations;
  // Test hook PICKLE_TEST_FAIL_NET_WRITE=n (docs/env.md): the n-th call of write() on this transport throws, as a
  // source registration that the provider refuses would (verbs, efa). tcp registers no sources, so without it no
  // test could make a write fail where callers have to cope with one. 0 (the default): never.
  long long test_fail_write_at = 0;
  std::atomic<long long> writes_called{0};
  // The handshake's buffer: its first bytes are the source of this rank's handshake writes and the target of the
  // peers' ones. Freed after ~Impl's body has closed the registrations.
  std::unique_ptr<device::Allocation> hello;

  /// What a peer's write needs to reach `ptr`, which lies in the registration `entry`.
  RemoteRegion region_of(const RegistrationCache::Entry& entry, const void* ptr) const {
    const auto offset = static_cast<std::uint64_t>(static_cast<const std::byte*>(ptr) - entry.base);
    return RemoteRegion{virt_addr ? reinterpret_cast<std::uint64_t>(ptr) : offset, entry.key};
  }
  /// The set-up handshake: writes from `hello` (registered as `hello_entry`) over every lane into `hellos` (one per
  /// entry of `peers`) and waits for them.
  void connect_lanes(const std::vector<int>& peers, const std::vector<RemoteRegion>& hellos,
                     const RegistrationCache::Entry& hello_entry, const Deadline& deadline);

  ~Impl() {
    // Threads first (they use everything), then the endpoints (libfabric may use registrations while closing
    // one), then the registrations (closed in their domains), then the rails' domains.
    for (auto& rail : rails) rail->stop();
    std::vector<Rail*> all;
    for (auto& rail : rails) all.push_back(rail.get());
    Rail::close_endpoints(all);
    registrations.reset();
    rails.clear();
  }
};

NetTransport::NetTransport(int rank, int world, const std::vector<bool>& uses, Store& store,
                           const std::string& key_prefix, const NetOptions& options, const Deadline& deadline,
                           PeerFailed on_peer_failed)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  validate(options);
  if (rank < 0 || rank >= world || static_cast<int>(uses.size()) != world) {
    throw InvalidArgument(cat("net transport: rank ", rank, " of ", world, " with ", uses.size(), " peer flags"));
  }
  s.rank = rank;
  s.options = options;
  s.test_fail_write_at = env::get_int("PICKLE_TEST_FAIL_NET_WRITE");
  const OpContext setup{rank, -1, "net transport set-up"};

  s.info = select_provider(options, rank);
  const fi_info& info = *s.info;
  s.local_mr = (info.domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  s.virt_addr = (info.domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  if (options.chunk > info.ep_attr->max_msg_size) {
    throw InvalidArgument(cat(describe(setup), ": PICKLE_NET_CHUNK=", options.chunk, " exceeds the largest RMA write of ",
                              describe_provider(info), " (", info.ep_attr->max_msg_size, " bytes)"));
  }
  // The provider's transmit queue bounds the writes a lane can have posted.
  if (info.tx_attr->size > 0 && static_cast<std::size_t>(s.options.inflight_per_lane) > info.tx_attr->size) {
    s.options.inflight_per_lane = static_cast<int>(info.tx_attr->size);
  }
  const std::size_t receives_per_lane =
      (info.mode & FI_RX_CQ_DATA) != 0 ? std::min<std::size_t>(kReceivesPerLane, std::max<std::size_t>(info.rx_attr->size, 1)) : 0;

  const bool directional = moves_bytes_by_cpu(info);
  const int rail_count = directional ? options.lanes : 1;  // per direction
  const int all_rails = rail_count * (directional ? 2 : 1);
  s.shared = std::make_unique<SharedState>(rank, env::timeout_seconds(), std::move(on_peer_failed));
  s.shared->peers.resize(static_cast<std::size_t>(world));
  std::vector<int> peers;
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank || !uses[static_cast<std::size_t>(peer)]) continue;
    peers.push_back(peer);
    auto link = std::make_unique<PeerLink>();
    link->rank = peer;
    link->rails_open = all_rails;
    s.shared->peers[static_cast<std::size_t>(peer)] = std::move(link);
  }

  for (int r = 0; r < all_rails; ++r) {
    const int lanes_here = options.lanes / rail_count + (r % rail_count < options.lanes % rail_count ? 1 : 0);
    const auto direction = !directional ? Rail::Direction::Both
                           : r < rail_count ? Rail::Direction::Sending
                                            : Rail::Direction::Landing;
    s.rails.push_back(
        std::make_unique<Rail>(r, direction, *s.shared, info, s.options, lanes_here, receives_per_lane, peers));
    (r < rail_count ? s.sending : s.landing).push_back(s.rails.back().get());
  }
  if (!directional) s.landing = s.sending;
  std::vector<RegistrationCache::Domain> domains;
  for (auto& rail : s.rails) domains.push_back({rail->domain(), &rail->fabric_mutex()});
  s.registrations = std::make_unique<RegistrationCache>(
      std::move(domains), (info.domain_attr->mr_mode & FI_MR_PROV_KEY) != 0, rank,
      [shared = s.shared.get()] { return shared->failed_peers_closed(); });
  s.shared->wake_rails = [&s] {
    for (auto& rail : s.rails) rail->wake();
  };
  s.description = cat(describe_provider(info), ", ", options.lanes, " lane", options.lanes == 1 ? "" : "s", " on ",
                      s.rails.size(), " progress thread", s.rails.size() == 1 ? "" : "s",
                      directional ? " (one per lane and direction)" : "", ", ", human_bytes(options.chunk), " chunks");

  s.hello = device::allocate(MemoryKind::Host, kHelloBytes);
  const auto& hello_entry = s.registrations->find_or_register(s.hello->data(), kHelloBytes, "net handshake buffer",
                                                              /*counted=*/false);

  // Our endpoints exist and their receives are posted before the cards go out: a peer may write as soon as it has
  // read ours.
  EndpointCard mine;
  const RemoteRegion hello = s.region_of(hello_entry, s.hello->data());
  mine.hello_addr = hello.addr;
  mine.hello_key = hello.key;
  mine.provider = info.fabric_attr->prov_name ? info.fabric_attr->prov_name : "";
  mine.lanes = static_cast<std::uint32_t>(options.lanes);
  mine.chunk = options.chunk;
  mine.directional = directional;
  // Lane l's endpoint on rail set `rails` (sending or landing).
  const auto rail_of = [rail_count](const std::vector<Rail*>& rails, int lane) {
    return rails[static_cast<std::size_t>(lane % rail_count)];
  };
  for (int peer : peers) {
    EndpointCard card = mine;
    for (int lane = 0; lane < options.lanes; ++lane) {
      card.names.push_back(rail_of(s.landing, lane)->endpoint_address(peer, lane / rail_count));
    }
    for (int lane = 0; directional && lane < options.lanes; ++lane) {
      card.names.push_back(rail_of(s.sending, lane)->endpoint_address(peer, lane / rail_count));
    }
    store.set(card_key(key_prefix, rank, peer), encode_card(card));
  }
  std::vector<RemoteRegion> hellos;  // per entry of `peers`
  for (int peer : peers) {
    EndpointCard theirs = fetch_card(store, key_prefix, rank, peer, deadline);
    check_compatible(mine, theirs, rank, peer);
    hellos.push_back({theirs.hello_addr, theirs.hello_key});
    s.shared->peers[static_cast<std::size_t>(peer)]->peer_chunk = theirs.chunk;
    // Our sending endpoint of a lane writes into the peer's landing one; with directions, our landing endpoint
    // knows the peer's sending one (connection-oriented providers accept from the addresses they have).
    for (int lane = 0; lane < options.lanes; ++lane) {
      rail_of(s.sending, lane)->connect(peer, lane / rail_count, theirs.names[static_cast<std::size_t>(lane)]);
      if (directional) {
        rail_of(s.landing, lane)->connect(peer, lane / rail_count,
                                          theirs.names[static_cast<std::size_t>(options.lanes + lane)]);
      }
    }
  }
  bool descriptors = true;
  for (auto& rail : s.rails) descriptors = descriptors && rail->sleeps_on_descriptors();
  PICKLE_LOG(Info, "transport", "rank " << rank << ": net transport: " << s.description
                                        << (s.local_mr ? ", local registration" : "")
                                        << (s.virt_addr ? ", virtual addresses" : ", offset addresses")
                                        << (receives_per_lane > 0 ? ", receives for CQ data" : "")
                                        << (descriptors ? ", threads sleep on wait descriptors" : ", threads nap"));
  for (auto& rail : s.rails) rail->start();
  s.connect_lanes(peers, hellos, hello_entry, deadline);
}

void NetTransport::Impl::connect_lanes(const std::vector<int>& peers, const std::vector<RemoteRegion>& hellos,
                                       const RegistrationCache::Entry& hello_entry, const Deadline& deadline) {
  // Connection-oriented providers (tcp;ofi_rxm, verbs;ofi_rxm) connect an endpoint to a peer's on its first
  // operation, and the peer's thread may be asleep when the request comes: about 10 ms per lane and direction over
  // loopback tcp, paid by the first messages of a job (4 KiB messages measured 3 ms each until every lane had
  // carried one). So every lane writes a few bytes to its peer here, without remote CQ data (the peer's transport
  // hears nothing), and set-up waits for those writes: the connections are made now, and a peer that cannot be
  // reached (a wrong interface, a firewall) is an error of set-up, naming the peer, rather than of a first transfer.
  const int rail_count = static_cast<int>(sending.size());
  const std::vector<void*> descs = local_mr ? hello_entry.descs : std::vector<void*>{};
  const std::int64_t started_ns = now_ns();
  auto connected = std::make_shared<std::atomic<std::size_t>>(0);
  const std::size_t total = peers.size() * static_cast<std::size_t>(options.lanes);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const int peer = peers[i];
    {
      std::lock_guard lock(shared->mutex);
      if (PeerLink* link = shared->peer(peer)) {
        link->unfinished_writes += static_cast<std::uint64_t>(options.lanes);  // PICKLE_TIMEOUT applies to them
        link->last_progress_ns = now_ns();
      }
    }
    for (int lane = 0; lane < options.lanes; ++lane) {
      auto out = std::make_shared<OutMessage>();
      out->peer = peer;
      out->src = static_cast<const std::byte*>(hello->data());
      out->bytes = kHelloBytes;
      out->dst = hellos[i];
      out->chunks = 1;
      out->chunk_bytes = kHelloBytes;
      out->descs = descs;
      out->pin = hello_entry.in_use;
      out->with_data = false;
      out->on_sent = [connected] { connected->fetch_add(1); };
      sending[static_cast<std::size_t>(lane % rail_count)]->submit(peer, Stripe{out, 0, 1, lane / rail_count});
    }
  }
  while (true) {
    bool done = false;
    {
      std::lock_guard lock(shared->mutex);
      for (int peer : peers) {
        const PeerLink* link = shared->peer(peer);
        if (link != nullptr && link->failed.load()) {
          throw PeerError(cat(link->failure, " (connecting its ", options.lanes, " lane(s) at set-up)"), peer);
        }
      }
      // Read once, with the flag: a count that reached the total just after would return with the flag still set,
      // and a later failure would never reach on_peer_failed.
      done = connected->load() == total;
      if (done) shared->setting_up = false;  // failures from now on go to on_peer_failed
    }
    if (done) {
      PICKLE_LOG(Info, "transport", "rank " << rank << ": net transport: " << total << " lane(s) to " << peers.size()
                                            << " peer(s) connected in "
                                            << static_cast<double>(now_ns() - started_ns) / 1e6 << " ms");
      return;
    }
    if (deadline.expired()) {
      std::string waiting;
      {
        std::lock_guard lock(shared->mutex);
        for (int peer : peers) {
          const PeerLink* link = shared->peer(peer);
          if (link != nullptr && link->unfinished_writes > 0) waiting += cat(waiting.empty() ? "" : ", ", peer);
        }
      }
      throw TimeoutError(cat("rank ", rank, ": net transport set-up: the handshake over every lane (", options.lanes,
                             " per peer) did not complete within the set-up deadline of ",
                             deadline.timeout().count(), " ms; still connecting to peer(s) ", waiting, " over ", description,
                             " (can the hosts reach each other through PICKLE_NET_IFACE?)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

NetTransport::~NetTransport() = default;

bool NetTransport::uses(int peer) const { return impl_->shared->peer(peer) != nullptr; }

std::string NetTransport::description() const { return impl_->description; }

const NetOptions& NetTransport::options() const { return impl_->options; }

RemoteRegion NetTransport::expose(const void* ptr, std::size_t bytes) {
  return impl_->region_of(impl_->registrations->find_or_register(ptr, bytes, "expose"), ptr);
}

void NetTransport::write(int peer, const void* src, std::size_t bytes, RemoteRegion dst, std::uint32_t message,
                         std::function<void()> on_sent) {
  Impl& s = *impl_;
  const OpContext where{s.rank, peer, "net write", bytes};
  PeerLink* link = s.shared->peer(peer);
  if (link == nullptr) throw InvalidArgument(cat(describe(where), ": the net transport does not join these ranks"));
  if (src == nullptr && bytes > 0) throw InvalidArgument(cat(describe(where), ": null source"));
  auto out = std::make_shared<OutMessage>();
  out->peer = peer;
  out->src = static_cast<const std::byte*>(src);
  out->bytes = bytes;
  out->dst = dst;
  out->id = message;
  out->chunk_bytes = s.options.chunk;
  out->chunks = chunks_of(bytes, s.options.chunk);
  out->on_sent = std::move(on_sent);
  // The test hook fails the write here, where a refused source registration would: before anything is accepted.
  if (s.test_fail_write_at > 0 && s.writes_called.fetch_add(1) + 1 == s.test_fail_write_at) {
    throw Error(ErrorCode::System, cat(describe(where), ": refused by the test hook PICKLE_TEST_FAIL_NET_WRITE=",
                                       s.test_fail_write_at));
  }
  if (bytes > 0 && s.local_mr) {
    const auto& entry = s.registrations->find_or_register(src, bytes, "net write source");
    out->descs = entry.descs;
    out->pin = entry.in_use;
  }
  {
    std::lock_guard lock(s.shared->mutex);
    if (link->failed.load()) throw PeerError(cat(describe(where), ": the peer failed earlier"), peer);
    if (!s.shared->owes_progress(*link)) link->last_progress_ns = now_ns();
    ++link->unfinished_writes;
  }
  // Chunk i goes to sending rail (start + i) % R; the start rotates so that one-chunk messages spread over the
  // rails too.
  const std::uint64_t rails = s.sending.size();
  const std::uint64_t start = link->next_rail.fetch_add(1) % rails;
  for (std::uint64_t first = 0; first < std::min(rails, out->chunks); ++first) {
    s.sending[(start + first) % rails]->submit(peer, Stripe{out, first, rails});
  }
}

void NetTransport::expect(int peer, std::uint32_t message, std::size_t bytes, std::function<void()> on_arrived,
                          const void* target) {
  Impl& s = *impl_;
  std::shared_ptr<const void> pin = target != nullptr ? s.registrations->pin(target) : nullptr;
  const OpContext where{s.rank, peer, "net expect", bytes};
  PeerLink* link = s.shared->peer(peer);
  if (link == nullptr) throw InvalidArgument(cat(describe(where), ": the net transport does not join these ranks"));
  const std::uint64_t chunks = chunks_of(bytes, link->peer_chunk);
  bool due = false;
  {
    std::lock_guard lock(s.shared->mutex);
    if (link->failed.load()) throw PeerError(cat(describe(where), ": the peer failed earlier"), peer);
    if (link->expected.count(message) != 0) {
      throw InvalidArgument(cat(describe(where), ": message ", message, " from this peer is already expected"));
    }
    auto landed = link->arrived.find(message);
    const std::uint64_t so_far = landed == link->arrived.end() ? 0 : landed->second;
    if (so_far > chunks) {
      throw ProtocolError(cat(describe(where), ": ", so_far, " chunks of message ", message, " landed, more than the ",
                              chunks, " a message of this size has (ids reused too early, or sizes disagree)"));
    }
    if (so_far == chunks) {
      link->arrived.erase(landed);
      s.shared->ready.push_back(std::move(on_arrived));
      due = true;
    } else {
      link->expected.emplace(message, Expectation{chunks, std::move(on_arrived), std::move(pin)});
    }
  }
  if (due) s.rails.front()->wake();  // rail 0 runs the callbacks API calls find due
}

void NetTransport::forget(int peer, std::uint32_t message) {
  std::function<void()> dropped;  // destroyed after the lock: it holds the caller's state
  std::lock_guard lock(impl_->shared->mutex);
  PeerLink* link = impl_->shared->peer(peer);
  if (link == nullptr) return;
  if (auto it = link->expected.find(message); it != link->expected.end()) {
    dropped = std::move(it->second.on_arrived);
    if (it->second.owed) --link->owed_expectations;
    link->expected.erase(it);
  }
  link->arrived.erase(message);
}

void NetTransport::owe(int peer, std::uint32_t message) {
  std::lock_guard lock(impl_->shared->mutex);
  PeerLink* link = impl_->shared->peer(peer);
  if (link == nullptr || link->failed.load()) return;
  auto it = link->expected.find(message);
  if (it == link->expected.end() || it->second.owed) return;
  it->second.owed = true;
  ++link->owed_expectations;
}

bool NetTransport::release(int peer, const Deadline& deadline) {
  Impl& s = *impl_;
  if (s.shared->peer(peer) == nullptr) return true;
  // Nothing happens when the transport failed the peer first: its rails are closing their endpoints already.
  s.shared->fail(peer, "failed by the communicator (the peer's control channel closed)", /*report=*/false);
  // Dropping the peer's writes takes closing its endpoints: fi_cancel reaches only receives in rxm and tcp, not
  // RMA writes already handed to the provider. The rails close them once their queues went quiet (rail_close.cpp).
  for (const auto& rail : s.rails) {
    if (rail->on_own_thread()) return s.shared->closed(peer);
  }
  while (!s.shared->closed(peer)) {
    if (deadline.expired()) {
      PICKLE_LOG(Warn, "transport", "rank " << s.rank << " -> peer " << peer << ": net transport: the endpoints to "
                                            "the failed peer were not closed in time; its writes may still read "
                                            "their sources");
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void NetTransport::release_closed_peer(int peer) {
  if (impl_->shared->peer(peer) != nullptr) impl_->shared->fail(peer, "closed its communicator", /*report=*/false);
}

bool NetTransport::flush(const Deadline& deadline) {
  while (true) {
    {
      std::lock_guard lock(impl_->shared->mutex);
      bool busy = false;
      for (const auto& link : impl_->shared->peers) busy = busy || (link && !link->failed.load() && link->unfinished_writes > 0);
      if (!busy) return true;
    }
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void NetTransport::stop_callbacks() {
  for (auto& rail : impl_->rails) rail->stop();
}

std::vector<NetTransport::RailLoad> NetTransport::rail_loads() const {
  std::vector<RailLoad> loads;
  for (const auto& rail : impl_->rails) loads.push_back(rail->load());
  return loads;
}

TransportStats NetTransport::stats() const {
  TransportStats stats;
  stats.bytes = impl_->shared->bytes.load();
  stats.operations = impl_->shared->operations.load();
  stats.ipc_opens = impl_->registrations->registrations();
  stats.ipc_closes = impl_->registrations->releases();
  stats.cache_hits = impl_->registrations->hits();
  return stats;
}

}  // namespace pickle::transport::net
