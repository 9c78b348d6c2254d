// Rank programs of test_net_transport.cpp: real processes that build a NetTransport over the job's store and move
// checked data with it. Each returns 0 on success and prints what went wrong otherwise.
#ifdef PICKLE_HAVE_LIBFABRIC

#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/wire.hpp"
#include "device/memory.hpp"
#include "subprocess.hpp"
#include "transport/net/net_transport.hpp"

namespace pickle::test {
namespace {

using transport::net::NetTransport;
using transport::net::RemoteRegion;

#define NET_CHECK(cond, ...)                                                                                     \
  do {                                                                                                           \
    if (!(cond)) {                                                                                               \
      std::fprintf(stderr, "rank check failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond,                   \
                   ::pickle::cat(__VA_ARGS__).c_str());                                                          \
      return 1;                                                                                                  \
    }                                                                                                            \
  } while (0)

std::uint64_t pattern_word(std::uint64_t word, std::uint64_t seed) {
  std::uint64_t x = word * 0x9E3779B97F4A7C15ull + (seed + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 27);
}

std::uint8_t pattern_byte(std::size_t index, std::uint64_t seed) {
  return static_cast<std::uint8_t>(pattern_word(index / 8, seed) >> (8 * (index % 8)));
}

void fill_pattern(std::byte* data, std::size_t bytes, std::uint64_t seed) {
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = pattern_word(i / 8, seed);
    std::memcpy(data + i, &word, 8);
  }
  for (; i < bytes; ++i) data[i] = static_cast<std::byte>(pattern_byte(i, seed));
}

/// Index of the first byte that differs from the pattern, or SIZE_MAX.
std::size_t check_pattern(const std::byte* data, std::size_t bytes, std::uint64_t seed) {
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = pattern_word(i / 8, seed);
    if (std::memcmp(data + i, &word, 8) != 0) break;
  }
  for (; i < bytes; ++i) {
    if (static_cast<std::uint8_t>(data[i]) != pattern_byte(i, seed)) return i;
  }
  return SIZE_MAX;
}

std::uint64_t seed_of(int from, int to, std::size_t message) { return (static_cast<std::uint64_t>(from) << 40) ^ (static_cast<std::uint64_t>(to) << 32) ^ message; }

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> sizes;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) sizes.push_back(static_cast<std::size_t>(std::stoull(item)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sizes;
}

/// Counts callbacks from the progress thread; the rank's main thread waits on it with a deadline.
class Tally {
 public:
  void sent() { bump(sent_); }
  void arrived() { bump(arrived_); }
  void failed(int peer, const std::string& reason) {
    std::lock_guard lock(mutex_);
    failures_.push_back(cat("peer ", peer, ": ", reason));
    changed_.notify_all();
  }
  /// Waits until the counts are reached or a peer failed, for at most `seconds`.
  bool wait(std::uint64_t want_sent, std::uint64_t want_arrived, double seconds) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
      return !failures_.empty() || (sent_ >= want_sent && arrived_ >= want_arrived);
    }) && failures_.empty();
  }
  /// Whether no failure beyond the first `known` comes within `seconds`.
  bool no_failure_after(std::size_t known, double seconds) {
    std::unique_lock lock(mutex_);
    return !changed_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return failures_.size() > known; });
  }
  std::size_t failure_count() {
    std::lock_guard lock(mutex_);
    return failures_.size();
  }
  bool wait_failure(double seconds) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return !failures_.empty(); });
  }
  std::string summary() {
    std::lock_guard lock(mutex_);
    std::string text = cat("sent ", sent_, ", arrived ", arrived_);
    for (const auto& failure : failures_) text += "; " + failure;
    return text;
  }
  std::uint64_t arrived_count() {
    std::lock_guard lock(mutex_);
    return arrived_;
  }

 private:
  void bump(std::uint64_t& counter) {
    std::lock_guard lock(mutex_);
    ++counter;
    changed_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t sent_ = 0, arrived_ = 0;
  std::vector<std::string> failures_;
};

std::vector<std::byte> encode_regions(const std::vector<RemoteRegion>& regions) {
  PayloadWriter out;
  out.u32(static_cast<std::uint32_t>(regions.size()));
  for (const auto& region : regions) out.u64(region.addr).u64(region.key);
  return out.take();
}

std::vector<RemoteRegion> decode_regions(const std::vector<std::byte>& bytes) {
  PayloadReader in("regions", bytes);
  std::vector<RemoteRegion> regions(in.u32("count"));
  for (auto& region : regions) {
    region.addr = in.u64("addr");
    region.key = in.u64("key");
  }
  return regions;
}

/// The transport of this rank to every other; its set-up may take `setup_seconds` (0: PICKLE_TIMEOUT).
std::unique_ptr<NetTransport> make_transport(Store& store, Tally& tally, const std::string& prefix = "net",
                                             double setup_seconds = 0) {
  const RankInfo& self = store.self();
  std::vector<bool> uses(static_cast<std::size_t>(self.world_size), true);
  return std::make_unique<NetTransport>(self.rank, self.world_size, uses, store, prefix,
                                        transport::net::options_from_env(),
                                        Deadline::after_seconds(setup_seconds > 0 ? setup_seconds : env::timeout_seconds()),
                                        [&tally](int peer, const std::string& reason) { tally.failed(peer, reason); });
}

}  // namespace

// Every rank sends every size of args[0] (comma-separated) args[1] times to every other rank, all at once, and
// checks what it receives byte for byte. Half the messages are expected before they are sent, half after the
// sends were issued (args[2] = "late": after a pause, so that their chunks have landed first).
PICKLE_CHILD(net_exchange) {
  const std::vector<std::size_t> sizes = parse_sizes(args.at(0));
  const std::size_t repeat = std::stoul(args.at(1));
  const bool late = args.size() > 2 && args[2] == "late";
  Store store(discover_rank_info());
  const int rank = store.self().rank;
  const int world = store.self().world_size;
  Tally tally;
  auto net = make_transport(store, tally);

  // Message i has size sizes[i / repeat] and sits at offsets[i] of one allocation per peer and direction:
  // unaligned, back to back, so that a write past its end would corrupt the next message.
  std::vector<std::size_t> size_of, offset_of;
  std::size_t total = 0;
  for (std::size_t size : sizes) {
    for (std::size_t r = 0; r < repeat; ++r) {
      size_of.push_back(size);
      offset_of.push_back(total);
      total += size;
    }
  }
  const std::size_t messages = size_of.size();
  std::vector<std::unique_ptr<device::Allocation>> send(world), receive(world);
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    send[peer] = device::allocate(MemoryKind::Host, total + 1);
    receive[peer] = device::allocate(MemoryKind::Host, total + 1);
    auto* out = static_cast<std::byte*>(send[peer]->data());
    for (std::size_t i = 0; i < messages; ++i) fill_pattern(out + offset_of[i], size_of[i], seed_of(rank, peer, i));
    std::memset(receive[peer]->data(), 0xEE, total + 1);
    std::vector<RemoteRegion> regions;
    auto* in = static_cast<std::byte*>(receive[peer]->data());
    for (std::size_t i = 0; i < messages; ++i) regions.push_back(net->expose(in + offset_of[i], size_of[i]));
    store.set(cat("regions/", peer, "<-", rank), encode_regions(regions));
  }
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    for (std::size_t i = 0; i < messages; i += 2) net->expect(peer, static_cast<std::uint32_t>(i), size_of[i], [&] { tally.arrived(); });
  }
  std::vector<std::vector<RemoteRegion>> regions(world);
  for (int peer = 0; peer < world; ++peer) {
    if (peer != rank) regions[peer] = decode_regions(store.get(cat("regions/", rank, "<-", peer)));
  }
  std::uint64_t expected_bytes = 0;
  for (std::size_t i = 0; i < messages; ++i) {
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      net->write(peer, static_cast<std::byte*>(send[peer]->data()) + offset_of[i], size_of[i], regions[peer][i],
                 static_cast<std::uint32_t>(i), [&] { tally.sent(); });
      expected_bytes += size_of[i];
    }
  }
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    for (std::size_t i = 1; i < messages; i += 2) net->expect(peer, static_cast<std::uint32_t>(i), size_of[i], [&] { tally.arrived(); });
  }
  const std::uint64_t pairs = static_cast<std::uint64_t>(world - 1);
  NET_CHECK(tally.wait(messages * pairs, messages * pairs, env::timeout_seconds()), "rank ", rank, ": ", tally.summary());

  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    const auto* in = static_cast<const std::byte*>(receive[peer]->data());
    for (std::size_t i = 0; i < messages; ++i) {
      const std::size_t bad = check_pattern(in + offset_of[i], size_of[i], seed_of(peer, rank, i));
      NET_CHECK(bad == SIZE_MAX, "rank ", rank, ": message ", i, " of ", size_of[i], " bytes from peer ", peer,
                " differs at byte ", bad);
    }
    NET_CHECK(static_cast<std::uint8_t>(in[total]) == 0xEE, "rank ", rank, ": a write ran past the last message");
  }
  const TransportStats stats = net->stats();
  NET_CHECK(stats.bytes == expected_bytes, "bytes ", stats.bytes, " != ", expected_bytes);
  NET_CHECK(stats.operations == messages * pairs, "operations ", stats.operations);
  // One registration per receive allocation (plus the send allocations where the provider needs local
  // registrations); every other expose found its allocation registered.
  NET_CHECK(stats.ipc_opens >= pairs && stats.ipc_opens <= 2 * pairs, "registrations ", stats.ipc_opens);
  NET_CHECK(stats.cache_hits >= (messages - 1) * pairs, "registration cache hits ", stats.cache_hits);
  // Where the provider has a thread per direction, sending rails took in nothing and landing rails wrote nothing.
  std::uint64_t landed = 0;
  for (const auto& load : net->rail_loads()) {
    using Direction = NetTransport::RailLoad::Direction;
    NET_CHECK(load.direction != Direction::Sending || load.chunks_landed == 0, "rank ", rank, ": a sending rail took in ",
              load.chunks_landed, " chunks");
    NET_CHECK(load.direction != Direction::Landing || load.chunks_written == 0, "rank ", rank, ": a landing rail wrote ",
              load.chunks_written, " chunks");
    landed += load.chunks_landed;
  }
  NET_CHECK(landed >= messages * pairs, "rank ", rank, ": ", landed, " chunks landed for ", messages * pairs,
            " messages");
  std::printf("rank %d: %s: %zu messages per peer, %s\n", rank, net->description().c_str(), messages,
              tally.summary().c_str());
  store.barrier("net_exchange done");
  return 0;
}

// Rank 1 kills itself (SIGKILL) once its first message arrived, while both ranks still have large writes in flight
// and messages expected. Rank 0 must learn it through on_peer_failed within PICKLE_TIMEOUT (plus slack), and later
// calls for the peer must throw PeerError.
// The two ranks of a peer-death program: a transport, and kMessages of kBytes each way, exposed, exchanged through the
// store and expected; rank 1 kills itself (SIGKILL) when its first message arrives, with the others on the wire.
struct DyingPair {
  static constexpr std::size_t kMessages = 4;
  static constexpr std::size_t kBytes = 32u << 20;
  Store store{discover_rank_info()};
  const int rank = store.self().rank;
  const int peer = 1 - rank;
  Tally tally;
  std::unique_ptr<NetTransport> net = make_transport(store, tally);
  std::unique_ptr<device::Allocation> send = device::allocate(MemoryKind::Host, kMessages * kBytes);
  std::unique_ptr<device::Allocation> receive = device::allocate(MemoryKind::Host, kMessages * kBytes);
  std::vector<RemoteRegion> theirs;

  explicit DyingPair(const std::string& name) {
    std::memset(send->data(), 0x5A, kMessages * kBytes);
    std::vector<RemoteRegion> mine;
    for (std::size_t i = 0; i < kMessages; ++i) {
      mine.push_back(net->expose(static_cast<std::byte*>(receive->data()) + i * kBytes, kBytes));
    }
    store.set(cat("regions/", peer, "<-", rank), encode_regions(mine));
    theirs = decode_regions(store.get(cat("regions/", rank, "<-", peer)));
    for (std::size_t i = 0; i < kMessages; ++i) {
      net->expect(peer, static_cast<std::uint32_t>(i), kBytes, [this] {
        tally.arrived();
        if (rank == 1) ::raise(SIGKILL);
      });
    }
    store.barrier(name + " start");
  }
  /// Writes the first `count` messages to the peer.
  void write(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      net->write(peer, static_cast<std::byte*>(send->data()) + i * kBytes, kBytes, theirs[i],
                 static_cast<std::uint32_t>(i), [this] { tally.sent(); });
    }
  }
};

PICKLE_CHILD(net_peer_death) {
  DyingPair pair("net_peer_death");
  constexpr std::size_t kMessages = DyingPair::kMessages;
  const int rank = pair.rank, peer = pair.peer;
  Tally& tally = pair.tally;
  auto& net = pair.net;
  auto& send = pair.send;
  auto& theirs = pair.theirs;
  Stopwatch clock;
  // Rank 1 writes one message fewer than rank 0 expects, so that rank 0 can never see them all arrive, however
  // early rank 1's writes land before it dies.
  pair.write(rank == 1 ? kMessages - 1 : kMessages);
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // killed long before
    return 3;
  }
  const double timeout = env::timeout_seconds();
  NET_CHECK(tally.wait_failure(timeout + 10), "rank 0 never learnt that rank 1 died: ", tally.summary());
  const double seconds = clock.seconds();
  NET_CHECK(seconds < timeout + 3, "the failure took ", seconds, " s with PICKLE_TIMEOUT=", timeout);
  NET_CHECK(tally.arrived_count() < kMessages, "a message arrived that rank 1 never wrote");
  bool threw = false;
  try {
    net->write(peer, send->data(), 8, theirs[0], 99, [] {});
  } catch (const PeerError& error) {
    threw = std::strstr(error.what(), "rank 0 -> peer 1") != nullptr;
  }
  NET_CHECK(threw, "write to a failed peer did not throw PeerError naming rank and peer");
  threw = false;
  try {
    net->expect(peer, 77, 8, [] {});
  } catch (const PeerError&) {
    threw = true;
  }
  NET_CHECK(threw, "expect from a failed peer did not throw PeerError");
  std::printf("rank 0: peer failure reported after %.2f s: %s\n", seconds, tally.summary().c_str());
  return 0;
}

// As net_peer_death, but rank 0 hears of the death from elsewhere first (here the store; in the communicator its
// control channel) and releases the peer, as the communicator does, long before the transport's own timeout would
// fail it: release() returns once the endpoints to the peer are closed, on_peer_failed is not called after it (the
// caller knows; a write that the dying peer's connection reset may have reported it before), flush() no longer waits for the dropped writes, the peer's calls throw PeerError, and the transport still
// closes promptly.
PICKLE_CHILD(net_release_dead_peer) {
  DyingPair pair("net_release_dead_peer");
  const int rank = pair.rank, peer = pair.peer;
  Store& store = pair.store;
  Tally& tally = pair.tally;
  auto& net = pair.net;
  auto& send = pair.send;
  auto& theirs = pair.theirs;
  pair.write(DyingPair::kMessages);
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // killed long before
    return 3;
  }
  // The store (hosted here) sees rank 1's connection close: the barrier fails with PeerError.
  bool died = false;
  try {
    store.barrier("net_release_dead_peer end");
  } catch (const PeerError&) {
    died = true;
  }
  NET_CHECK(died, "rank 1 reached the barrier instead of dying");
  const double timeout = env::timeout_seconds();
  Stopwatch clock;
  NET_CHECK(net->release(peer, Deadline::after_seconds(timeout)), "release did not finish");
  const double released = clock.seconds();
  // The transport may have seen the death itself before the release (a write of rank 0 reset by the dying peer's
  // kernel), and then reported it: what must not come is a report after the release.
  const std::size_t reported_before = tally.failure_count();
  NET_CHECK(released < timeout / 2, "release took ", released, " s");
  NET_CHECK(net->release(peer, Deadline::after_seconds(1)), "a second release did not return at once");
  NET_CHECK(net->flush(Deadline::after_seconds(1)), "flush still waits for the released peer's writes");
  NET_CHECK(tally.no_failure_after(reported_before, 0.5), "on_peer_failed ran for a released peer: ", tally.summary());
  bool threw = false;
  try {
    net->write(peer, send->data(), 8, theirs[0], 99, [] {});
  } catch (const PeerError&) {
    threw = true;
  }
  NET_CHECK(threw, "write to a released peer did not throw PeerError");
  threw = false;
  try {
    net->expect(peer, 77, 8, [] {});
  } catch (const PeerError&) {
    threw = true;
  }
  NET_CHECK(threw, "expect from a released peer did not throw PeerError");
  Stopwatch closing;
  net.reset();
  NET_CHECK(closing.seconds() < timeout / 2, "closing the transport took ", closing.seconds(), " s");
  std::printf("rank 0: released the dead peer in %.3f s, transport closed in %.3f s: %s\n", released,
              closing.seconds(), tally.summary().c_str());
  return 0;
}

// The tests of the no-progress timer set a short PICKLE_TIMEOUT, which is for that timer only: their store, set-up
// and waits get this much room for a loaded 2-core machine.
constexpr double kRoom = 30;
Store store_with_room(double seconds) {
  Store::Options room;
  room.timeout_seconds = seconds;
  return Store(discover_rank_info(), room);
}

// Rank 1 expects a message that rank 0 writes only after twice PICKLE_TIMEOUT: an early receive is not a fault,
// so neither side may fail the other meanwhile, and the message must then arrive intact.
PICKLE_CHILD(net_late_sender) {
  constexpr std::size_t kBytes = 3 * 65536 + 5;
  Store store = store_with_room(kRoom);
  const int rank = store.self().rank;
  const int peer = 1 - rank;
  Tally tally;
  auto net = make_transport(store, tally, "net", kRoom);
  auto buffer = device::allocate(MemoryKind::Host, kBytes);
  const double timeout = env::timeout_seconds();
  if (rank == 1) {
    std::memset(buffer->data(), 0xEE, kBytes);
    store.set("late/region", encode_regions({net->expose(buffer->data(), kBytes)}));
    net->expect(peer, 5, kBytes, [&] { tally.arrived(); });
    NET_CHECK(tally.wait(0, 1, 2 * timeout + kRoom), "rank 1: ", tally.summary());
    const std::size_t bad = check_pattern(static_cast<const std::byte*>(buffer->data()), kBytes, 5);
    NET_CHECK(bad == SIZE_MAX, "rank 1: the late message differs at byte ", bad);
  } else {
    fill_pattern(static_cast<std::byte*>(buffer->data()), kBytes, 5);
    const RemoteRegion region = decode_regions(store.get("late/region")).at(0);
    std::this_thread::sleep_for(std::chrono::duration<double>(2 * timeout));
    NET_CHECK(tally.wait(0, 0, 0.1), "rank 0: the peer was failed while it only waited: ", tally.summary());
    net->write(peer, buffer->data(), kBytes, region, 5, [&] { tally.sent(); });
    NET_CHECK(tally.wait(1, 0, kRoom), "rank 0: ", tally.summary());
  }
  store.barrier("net_late_sender done");
  return 0;
}

// Rank 1 expects two messages, the pieces of one transfer; rank 0, alive throughout, writes only the first. Once it
// landed rank 1 marks the second owed (NetTransport::owe, as the communicator does for a message's later pieces):
// rank 0's silence must then fail it within PICKLE_TIMEOUT (plus slack), naming the owed message, where an expected
// message alone is never a fault (net_late_sender). Rank 0 waits for rank 1's verdict before it leaves, so that
// its exit cannot be what ended the wait.
PICKLE_CHILD(net_owed_message) {
  constexpr std::size_t kBytes = 2 * 65536;
  Store store = store_with_room(kRoom);
  const int rank = store.self().rank;
  const int peer = 1 - rank;
  Tally tally;
  auto net = make_transport(store, tally, "net", kRoom);
  auto buffer = device::allocate(MemoryKind::Host, 2 * kBytes);
  const double timeout = env::timeout_seconds();
  if (rank == 1) {
    store.set("owed/region", encode_regions({net->expose(buffer->data(), 2 * kBytes)}));
    net->expect(peer, 7, kBytes, [&] { tally.arrived(); });
    net->expect(peer, 8, kBytes, [&] { tally.arrived(); });
    NET_CHECK(tally.wait(0, 1, kRoom), "rank 1: the first piece did not land: ", tally.summary());
    net->owe(peer, 8);
    Stopwatch clock;
    NET_CHECK(tally.wait_failure(timeout + 10), "rank 1: a silent peer that owes a message was not failed: ",
              tally.summary());
    const std::string summary = tally.summary();
    std::printf("rank 1: failed after %.2f s: %s\n", clock.seconds(), summary.c_str());
    NET_CHECK(clock.seconds() < timeout + 5, "the failure took ", clock.seconds(), " s with PICKLE_TIMEOUT=", timeout);
    NET_CHECK(summary.find("1 more owed") != std::string::npos, "the failure does not name the owed message: ",
              summary);
    NET_CHECK(tally.arrived_count() == 1, "the unsent message arrived: ", summary);
    store.set("owed/verdict", "done");
  } else {
    const RemoteRegion region = decode_regions(store.get("owed/region")).at(0);
    net->write(peer, buffer->data(), kBytes, region, 7, [&] { tally.sent(); });
    NET_CHECK(tally.wait(1, 0, kRoom), "rank 0: ", tally.summary());
    (void)store.get("owed/verdict");  // alive, and silent, until rank 1 has judged
  }
  return 0;
}

// Rank 1 dies (SIGKILL) right after set-up, before any message between the ranks (set-up connected every lane);
// rank 0 then writes to it. ofi_rxm may report nothing on the completion queue (it answers a refused reconnection by
// retrying every few seconds), so the transport's timeout must end it: a failure within PICKLE_TIMEOUT (plus slack),
// no hang, and a transport that still shuts down.
PICKLE_CHILD(net_write_to_dead_peer) {
  Store store(discover_rank_info());
  const int rank = store.self().rank;
  Tally tally;
  auto net = make_transport(store, tally);
  auto buffer = device::allocate(MemoryKind::Host, 1 << 20);
  store.set(cat("regions/", 1 - rank, "<-", rank), encode_regions({net->expose(buffer->data(), 1 << 20)}));
  auto theirs = decode_regions(store.get(cat("regions/", rank, "<-", 1 - rank)));
  store.barrier("net_write_to_dead_peer ready");
  if (rank == 1) ::raise(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the kernel close the dead rank's sockets
  Stopwatch clock;
  net->write(1, buffer->data(), 1 << 20, theirs.at(0), 1, [&] { tally.sent(); });
  const double timeout = env::timeout_seconds();
  NET_CHECK(tally.wait_failure(timeout + 10), "rank 0 never learnt that rank 1 died: ", tally.summary());
  std::printf("rank 0: failure after %.2f s: %s\n", clock.seconds(), tally.summary().c_str());
  NET_CHECK(clock.seconds() < timeout + 3, "the failure took ", clock.seconds(), " s with PICKLE_TIMEOUT=", timeout);
  return 0;
}

// Set-up must fail with the error type args[0] whose message contains args[1] (ranks given different lane
// counts or providers through their environment).
PICKLE_CHILD(net_setup_refused) {
  Store store(discover_rank_info());
  Tally tally;
  try {
    auto net = make_transport(store, tally);
  } catch (const Error& error) {
    NET_CHECK(error_code_name(error.code()) == args.at(0), "got ", error.what());
    NET_CHECK(std::strstr(error.what(), args.at(1).c_str()) != nullptr, "got ", error.what());
    std::printf("rank %d refused as expected: %s\n", store.self().rank, error.what());
    return 0;
  }
  std::fprintf(stderr, "rank %d: the transport was built; expected %s\n", store.self().rank, args.at(0).c_str());
  return 1;
}

// Set-up must fail, within PICKLE_TIMEOUT plus slack, with an error of set-up that names the peer: the peers'
// endpoints cannot reach each other (args[0] is the peer's rank, as the message must name it).
PICKLE_CHILD(net_setup_unreachable) {
  Store store(discover_rank_info());
  Tally tally;
  Stopwatch clock;
  try {
    auto net = make_transport(store, tally);
  } catch (const Error& error) {
    const std::string what = error.what();
    std::printf("rank %d: set-up failed after %.2f s: %s\n", store.self().rank, clock.seconds(), what.c_str());
    NET_CHECK(error.code() == ErrorCode::Timeout || error.code() == ErrorCode::Peer, "got ", what);
    NET_CHECK(what.find("set-up") != std::string::npos, "the error does not say it is set-up's: ", what);
    NET_CHECK(what.find("peer " + args.at(0)) != std::string::npos ||
                  what.find("peer(s) " + args.at(0)) != std::string::npos,
              "the error does not name peer ", args.at(0), ": ", what);
    NET_CHECK(clock.seconds() < env::timeout_seconds() + 5, "set-up took ", clock.seconds(), " s to fail");
    return 0;
  }
  std::fprintf(stderr, "rank %d: the transport was built with a peer it cannot reach\n", store.self().rank);
  return 1;
}

// Misuse on a working pair: a message expected twice, memory outside pickle's allocations, a peer that is not
// joined; then one message each way still works.
PICKLE_CHILD(net_misuse) {
  Store store(discover_rank_info());
  const int rank = store.self().rank;
  const int peer = 1 - rank;
  Tally tally;
  auto net = make_transport(store, tally);
  auto expect_error = [&](const char* code, const char* text, auto&& call) -> bool {
    try {
      call();
    } catch (const Error& error) {
      if (error_code_name(error.code()) == std::string(code) && std::strstr(error.what(), text) != nullptr) return true;
      std::fprintf(stderr, "unexpected error: %s\n", error.what());
      return false;
    }
    std::fprintf(stderr, "no error for %s\n", text);
    return false;
  };
  net->expect(peer, 1, 4096, [&] { tally.arrived(); });
  NET_CHECK(expect_error("InvalidArgument", "already expected", [&] { net->expect(peer, 1, 4096, [] {}); }), "");
  // A message that will never come (its send failed) is forgotten, without its callback, and may be expected again.
  bool forgotten_ran = false;
  net->expect(peer, 2, 4096, [&] { forgotten_ran = true; });
  net->forget(peer, 2);
  net->forget(peer, 3);  // not expected: nothing
  net->expect(peer, 2, 4096, [] {});
  net->forget(peer, 2);
  NET_CHECK(!forgotten_ran, "a forgotten expectation's callback ran");
  std::vector<std::byte> plain(64);
  NET_CHECK(expect_error("InvalidArgument", "pickle host allocations", [&] { net->expose(plain.data(), plain.size()); }), "");
  NET_CHECK(expect_error("InvalidArgument", "does not join", [&] { net->write(rank, plain.data(), 8, {}, 5, [] {}); }), "");
  NET_CHECK(expect_error("InvalidArgument", "does not join", [&] { net->expect(7, 5, 8, [] {}); }), "");
  auto buffer = device::allocate(MemoryKind::Host, 8192);
  NET_CHECK(expect_error("InvalidArgument", "past the end", [&] { net->expose(buffer->data(), 8193); }), "");
  fill_pattern(static_cast<std::byte*>(buffer->data()), 4096, seed_of(rank, peer, 1));
  store.set(cat("regions/", peer, "<-", rank), encode_regions({net->expose(static_cast<std::byte*>(buffer->data()) + 4096, 4096)}));
  auto theirs = decode_regions(store.get(cat("regions/", rank, "<-", peer)));
  net->write(peer, buffer->data(), 4096, theirs.at(0), 1, [&] { tally.sent(); });
  NET_CHECK(tally.wait(1, 1, env::timeout_seconds()), tally.summary());
  NET_CHECK(check_pattern(static_cast<std::byte*>(buffer->data()) + 4096, 4096, seed_of(peer, rank, 1)) == SIZE_MAX, "data");
  store.barrier("net_misuse done");
  return 0;
}

}  // namespace pickle::test

#endif  // PICKLE_HAVE_LIBFABRIC
