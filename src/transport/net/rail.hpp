#pragma once
// A rail: one libfabric domain with its endpoints towards every peer and the thread that drives them. A transport
// has one rail when the provider offloads the data movement to a NIC (verbs, efa: one thread keeps many queue pairs
// busy) and one rail per lane and direction when the provider moves bytes with the CPU (tcp, shm: the progress
// thread's socket or memory copies are the transfer, so lanes go only as fast as the threads that drive them, and a
// thread that both sent and received would split itself between the two). A sending rail's endpoints post this
// rank's writes; a landing rail's endpoints take the peers' writes; a NIC provider's one rail does both.
//
// The rail's thread posts the writes of the stripes it is given, reads its completion queues (one per peer),
// reposts the receives some providers consume per remote CQ data, closes its endpoints to a peer that failed, and
// runs the callbacks it completed. It spins briefly while work is pending, then sleeps in poll() on the queues' wait
// descriptors and its wake eventfd, or, for providers without wait descriptors, for short naps.

#include <rdma/fabric.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/format.hpp"
#include "core/unique_fd.hpp"
#include "transport/net/fabric_objects.hpp"
#include "transport/net/net_options.hpp"
#include "transport/net/net_shared.hpp"

namespace pickle::transport::net {

class Rail {
 public:
  /// Opens this rail's fabric, domain and address vector and, for each of `peers`, a completion queue and `lanes`
  /// enabled endpoints with `receives_per_lane` receives posted (FI_RX_CQ_DATA providers).
  using Direction = NetTransport::RailLoad::Direction;
  Rail(int index, Direction direction, SharedState& shared, const fi_info& info, const NetOptions& options, int lanes,
       std::size_t receives_per_lane, const std::vector<int>& peers);
  /// Stops the thread (if running) and closes everything.
  ~Rail();
  Rail(const Rail&) = delete;
  Rail& operator=(const Rail&) = delete;

  /// The address of this rail's endpoint for (`peer`, `lane`) (lane counted within the rail).
  std::vector<std::byte> endpoint_address(int peer, int lane);
  /// Inserts the peer's endpoint that our (`peer`, `lane`) endpoint talks to.
  void connect(int peer, int lane, std::span<const std::byte> address);
  /// Starts the thread. Until then, remote writes wait in the provider.
  void start();
  /// Stops and joins the thread; pending work is dropped without callbacks.
  void stop();
  /// After stop() of each: drains every peer's queue of every one of `rails`, all at once, and closes all their
  /// endpoints and queues. Called before the memory registrations close: libfabric may still use them while it
  /// closes an endpoint.
  static void close_endpoints(const std::vector<Rail*>& rails);

  /// Queues a stripe of a message to `peer` and wakes the thread.
  void submit(int peer, Stripe stripe);
  /// Wakes the thread if it sleeps (new work, a failed peer, due callbacks).
  void wake();

  /// Serialises calls into this rail's domain (opened FI_THREAD_DOMAIN); registration takes it too.
  std::mutex& fabric_mutex() noexcept { return fabric_mutex_; }
  fid_domain* domain() const noexcept { return domain_.get(); }
  /// Whether every completion queue has a wait descriptor (the thread sleeps in poll() rather than napping).
  bool sleeps_on_descriptors() const;
  NetTransport::RailLoad load() const {
    return {direction_, chunks_written_.load(std::memory_order_relaxed), chunks_landed_.load(std::memory_order_relaxed)};
  }
  /// Whether the caller is this rail's thread (a callback it runs).
  bool on_own_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  struct PostedOp;
  struct Lane;
  struct PeerRail;

  void run();
  bool round(Callbacks& callbacks);
  bool post_writes(PeerRail& peer);
  bool poll_queue(PeerRail& peer, Callbacks& callbacks);
  void repost_receives(PeerRail& peer);
  /// A failure this rail saw: marks the peer failed (once for the transport; the other rails are woken to close
  /// theirs) and starts closing this rail's endpoints to it.
  void fail(PeerRail& peer, const std::string& reason);
  /// Stops posting to the peer and drops its queued work; the endpoints stay open while the queue drains.
  void start_closing(PeerRail& peer, bool failed);
  /// Reads and discards the draining peer's completions; once its queue has been quiet long enough, closes the
  /// endpoints (the provider then touches no buffer of a dropped operation again, and nothing more from the peer
  /// lands in our memory) and calls rail_closed: the last rail to close queues on_peer_failed. True if it moved.
  bool drain(PeerRail& peer, Callbacks& callbacks);
  /// Reads and discards what the peer's queue holds; true if it held anything.
  bool discard_completions(PeerRail& peer);
  /// Closes the peer's endpoints, then its queue.
  static void close_now(PeerRail& peer);
  /// close_endpoints' parts: stop posting to every peer and start its quiet period; then one pass over the
  /// draining queues, true once every peer's endpoints are closed.
  void begin_closing();
  bool closing_step();
  void sleep_until_work();
  PeerRail* find(int peer) const;

  int index_;
  Direction direction_;
  SharedState& shared_;
  OpContext where_;
  std::mutex fabric_mutex_;
  // Destroyed bottom-up: peers (endpoints, queues), address vector, domain, fabric.
  Fabric fabric_;
  Domain domain_;
  AddressVector av_;
  std::vector<std::unique_ptr<PeerRail>> peers_;

  std::mutex inbox_mutex_;  // guards PeerRail::incoming
  UniqueFd wake_fd_;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> chunks_written_{0};  // written by the thread only; read by load()
  std::atomic<std::uint64_t> chunks_landed_{0};
  std::thread thread_;
};

}  // namespace pickle::transport::net
