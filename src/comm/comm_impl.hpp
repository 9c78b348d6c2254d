#pragma once
// The state behind pickle::Communicator. One mutex guards matching and per-peer bookkeeping; the progress thread
// (progress.cpp) reads every control channel and feeds the same state. Sends on a channel hold that channel's send
// mutex only (never the state mutex), so that two ranks sending to each other can never block each other.

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <pickle/communicator.hpp>

#include "comm/control.hpp"
#include "comm/signal_area.hpp"
#include "core/format.hpp"
#include "core/unique_fd.hpp"
#include "device/fd_channel.hpp"
#include "device/host/backoff.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "transport/ipc/ipc_transport.hpp"

namespace pickle {

using comm::ControlMessage;
using comm::ExportMessage;
using comm::GoodbyeMessage;
using comm::RecvPostMessage;
using comm::SendFailedMessage;
using comm::kCompletionSlots;
using comm::kUserSignalSlots;

/// Shared by a Request and the communicator.
struct RequestState {
  enum class Kind { Send, Recv };
  Kind kind = Kind::Send;
  Communicator::Impl* comm = nullptr;
  OpContext ctx;  // rank, peer, "send"/"recv", bytes
  int tag = 0;
  std::uint64_t seq = 0;

  // Send: set once the copy is enqueued. Its completion is the receiver's completion word (which the sender maps
  // too) reaching the generation of the matched post: no event per message.
  bool enqueued = false;
  std::unique_ptr<device::Event> after_event;     // its point at send() time, for a match made later
  const void* src = nullptr;

  // Both: the completion slot (of the receiver) and the generation that marks this message delivered.
  int slot = -1;
  std::uint32_t generation = 0;

  std::exception_ptr error;  // guarded by Impl::mutex
};

struct WindowState {
  int id = -1;
  void* local = nullptr;
  struct Entry {
    std::uint64_t alloc_id = 0;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<Entry> ranks;
};

struct Communicator::Impl {
  Impl(Options options);
  ~Impl();

  // --- point to point (p2p.cpp)
  Request send(int peer, int tag, const void* ptr, std::size_t bytes, Stream* after);
  Request recv(int peer, int tag, void* ptr, std::size_t bytes);
  /// Enqueues the copy of a matched send on `stream` (state mutex held). Returns the failure to report to the peer.
  std::optional<SendFailedMessage> start_copy(int peer, RequestState& send, const RecvPostMessage& post,
                                              device::Stream& stream);
  /// The word that marks `request` complete, as the host reads it, and as streams address it.
  std::uint32_t completion_value(const RequestState& request) const;
  std::uint32_t* completion_word_for_streams(const RequestState& request) const;
  /// Announces (once per peer) the allocation that contains `ptr`; returns its id and the pointer's offset.
  std::pair<std::uint64_t, std::uint64_t> announce(int peer, const void* ptr, std::size_t bytes, const OpContext& ctx);
  bool test(RequestState& request);
  void wait(RequestState& request);
  void on_stream(RequestState& request, device::Stream& stream);

  // --- control channel (progress.cpp)
  void send_control(int peer, const ControlMessage& message, int fd = -1);
  void progress_loop();
  void handle(int peer, ControlMessage message, UniqueFd fd);
  void fail_peer(int peer, const std::string& reason);
  /// Stops and joins the progress thread.
  void stop_progress();

  /// Polls `done` (which may throw) with a spin-yield-sleep backoff until it returns true, or false once `deadline`
  /// passed: every host-side wait of the communicator goes through here.
  template <class Done>
  static bool poll_until(const Deadline& deadline, Done&& done) {
    device::host::Backoff backoff;
    while (!done()) {
      if (deadline.expired()) return false;
      backoff.pause();
    }
    return true;
  }

  /// InvalidArgument unless `peer` is another rank of this communicator.
  void check_peer(int peer, const OpContext& ctx) const;
  /// PeerError when `peer` failed or left (takes the state mutex).
  void check_peer_alive(int peer, const OpContext& ctx) const;

  RankInfo info;
  MemoryKind kind;
  int device;
  double timeout_seconds;
  std::shared_ptr<Store> store;  // shared by the communicators of this job in this process
  std::string key_prefix;        // "comm/<n>/": this communicator's keys in the store
  std::vector<std::optional<device::FdChannel>> channels;
  std::vector<std::unique_ptr<std::recursive_mutex>> channel_send_mutex;  // per peer; held across announce + post
  std::unique_ptr<comm::SignalArea> signals;
  std::unique_ptr<transport::ipc::IpcTransport> ipc;

  mutable std::mutex mutex;  // everything below
  struct PeerState {
    bool failed = false;
    bool said_goodbye = false;
    std::string failure;
    std::map<int, std::uint64_t> send_seq, recv_seq;                          // per tag
    std::map<int, std::deque<std::shared_ptr<RequestState>>> pending_sends;   // per tag, not yet matched
    std::map<int, std::deque<RecvPostMessage>> pending_posts;                 // per tag, not yet matched
    std::map<std::pair<int, std::uint64_t>, std::shared_ptr<RequestState>> posted_recvs;  // (tag, seq)
    std::set<std::uint64_t> announced;                                        // allocation ids sent to this peer
    std::vector<std::uint32_t> slot_generation = std::vector<std::uint32_t>(kCompletionSlots, 0);
    std::vector<std::shared_ptr<RequestState>> slot_owner = std::vector<std::shared_ptr<RequestState>>(kCompletionSlots);
    std::vector<int> free_slots;
    std::vector<std::uint32_t> signals_sent = std::vector<std::uint32_t>(kUserSignalSlots, 0);
  };
  std::vector<PeerState> peers;
  std::vector<std::shared_ptr<WindowState>> windows;
  int user_barriers = 0;
  int next_window_id = 0;
  int next_completion_slot(int peer, std::unique_lock<std::mutex>& lock, const OpContext& ctx);

  std::thread progress;
  UniqueFd wake;  // eventfd: stops the progress thread
  std::atomic<bool> stopping{false};
};

}  // namespace pickle
