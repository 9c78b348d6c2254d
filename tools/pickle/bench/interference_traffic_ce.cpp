// The raw copy engine as the background (`--backend ce`, p2p only): the reference figures' "CE copies" column
// (cudaMemcpyPeerAsync GPU0 -> GPU1 under the foreground), measured in the same run as pickle and NCCL, so that
// pickle's slowdown of the compute can be told apart from what any copy into that GPU costs. As in `pickle bench
// p2p`'s ce backend (backend_ce.cpp): no kernel and no host in the data path, stream operations only.
//   rank 0  per message: a stream copy of `bytes` from its send buffer into rank 1's receive buffer, mapped into its
//           process, then a stream write-value of the message's sequence number into rank 1's flag word, also
//           mapped (a release: the copy is visible before the flag), then an event.
//   rank 1  per message: a stream wait-value on its own flag word for that number, then an event; so its
//           completions are the moments the messages landed, which the window arithmetic needs.
// On CUDA these are cudaMemcpyAsync (cudaMemcpyDefault, over NVLink or PCIe), cuStreamWriteValue32 and
// cuStreamWaitValue32; on host memory (the tests) the host stream's memcpy and flag operations.
//
// Why the mapping is made at set-up: the bench allocates one send and one receive buffer per rank before any
// backend runs, and every message of every row uses them (interference_rank.cpp); so setup() takes them
// (TrafficBuffers), rank 1 exports its receive buffer and a flag allocation of its own once, over a file-descriptor
// channel whose name it hands rank 0 through the store (device::export_memory / import_memory, as P2pContext
// does), and post() refuses other buffers rather than write somewhere unmapped.
//
// Sequence numbers run on across rows (one Traffic serves a backend's every row): after each row's drain both ranks
// have posted the same count, so rank 0's n-th write and rank 1's n-th wait name the same number. Rank 0 is not held
// back by rank 1 (nothing flows back): its own ring of `depth` copies paces it. Each row's copies rewrite the same
// bytes, and the last of them lands after rank 1 poisoned its buffer for the row (poisoning is over before any rank
// leaves the row's "start" phase, and rank 0 copies until the "drain" phase), so the row's check sees rank 0's
// pattern exactly where the copies did their work.
//
// Teardown: rank 1's flag allocation is mapped in rank 0, so rank 1 frees it only once rank 0 said, through the
// store, that its copies are over and its mappings gone; then it releases any wait still queued (after a failure,
// when the counts never met) before its stream goes.
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"
#include "device/fd_channel.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "interference_traffic.hpp"
#include "memory_exchange.hpp"

namespace pickle::bench {
namespace {

constexpr std::size_t kFlagBytes = 64;  // one 32-bit word in an allocation of its own, exported to rank 0
constexpr const char* kKeyPrefix = "bench/interference/ce/p2p/";

std::string key(const char* name) { return cat(kKeyPrefix, name); }

class CeTraffic final : public Traffic {
 public:
  CeTraffic(std::string_view background, TrafficRanks ranks, MemoryKind kind)
      : background_(background), ranks_(ranks), kind_(kind) {}

  ~CeTraffic() override {
    try {
      tear_down();
    } catch (...) {  // a destructor: what could not be said was logged where it could
    }
  }

  std::string_view background() const noexcept override { return background_; }
  std::string_view backend() const noexcept override { return "ce"; }

  void probe() override {
    if (background_ != "p2p") {
      throw UnavailableError(cat("the raw copy engine is a p2p background only (rank 0's copies into rank 1's mapped "
                                 "memory); an ", background_, " is a collective that pickle and NCCL run"));
    }
    if (ranks_.local_ranks < 2) {
      throw UnavailableError("ranks 0 and 1 are on different hosts, and no copy engine reaches another host's memory");
    }
  }

  std::string detail() const override { return detail_; }

  void setup(Store& store, int rank, int device, const TrafficBuffers& buffers) override {
    store_ = &store;
    rank_ = rank;
    device_ = device;
    buffers_ = buffers;
    const std::string what = describe({.rank = rank, .peer = 1 - rank, .op = "ce background set-up"});
    if (rank == 0 ? buffers.send == nullptr : buffers.recv == nullptr) {
      throw InvalidArgument(cat(what, ": rank ", rank, " has no ", rank == 0 ? "send" : "receive", " buffer"));
    }
    stream_ = device::make_stream(kind_, device);
    const Deadline deadline = Deadline::after_seconds(store.timeout_seconds());
    if (rank == 1) {
      flag_ = device::allocate(kind_, kFlagBytes, device);
      stream_->write_value(my_flag(), 0);
      stream_->synchronize();
      // A name of this job's own: concurrent runs on one host must never meet.
      const std::string name = cat("pickle-bench-interference-ce-", std::random_device{}(), "-", getpid());
      device::FdListener listener(name);
      store.set(key("channel"), name);
      device::FdChannel channel = listener.accept(deadline);
      channel.set_peer(0);
      exported_ = true;  // from here on rank 0 may hold a mapping of the flag allocation
      send_export(channel, buffers.recv, deadline);
      send_export(channel, flag_->data(), deadline);
      channel.recv(deadline);  // rank 0 mapped both (or failed, which the set-up phase reports)
    } else {
      device::FdChannel channel = device::FdChannel::connect(store.get_string(key("channel")), deadline);
      channel.set_peer(1);
      peer_recv_ = recv_import(channel, device, deadline);
      peer_flag_ = recv_import(channel, device, deadline);
      const char ack = 1;
      channel.send(std::as_bytes(std::span(&ack, 1)), deadline);
      detail_ = kind_ == MemoryKind::Cuda
                    ? cat("cudaMemcpyAsync into rank 1's receive buffer mapped here (",
                          device::alloc_method_name(peer_recv_->descriptor().method),
                          "), then cuStreamWriteValue32 into its flag; rank 1 waits with cuStreamWaitValue32")
                    : std::string("host stream memcpy into rank 1's mapped memory, then a flag write-value");
    }
  }

  void post(const void* send, void* recv, std::size_t bytes) override {
    if (rank_ == 0) {
      if (send != buffers_.send || bytes > peer_recv_->bytes()) throw bad_post("send", send, bytes);
      stream_->copy(peer_recv_->data(), send, bytes);
      stream_->write_value(peer_flag(), ++sequence_);
    } else {
      if (recv != buffers_.recv || bytes > buffers_.recv_bytes) throw bad_post("receive", recv, bytes);
      stream_->wait_value(my_flag(), ++sequence_);
    }
    std::unique_ptr<device::Event> event;
    if (spare_.empty()) {
      event = device::make_ordering_event(kind_, device_);
    } else {
      event = std::move(spare_.back());
      spare_.pop_back();
    }
    stream_->record(*event);
    pending_.push_back(std::move(event));
  }

  bool oldest_done() override { return !pending_.empty() && pending_.front()->query(); }

  void retire_oldest() override {
    if (pending_.empty()) return;
    spare_.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }

 private:
  std::uint32_t* my_flag() const { return static_cast<std::uint32_t*>(flag_->data()); }
  std::uint32_t* peer_flag() const { return static_cast<std::uint32_t*>(peer_flag_->data()); }

  InvalidArgument bad_post(const char* which, const void* buffer, std::size_t bytes) const {
    return InvalidArgument(cat(describe({.rank = rank_, .peer = 1 - rank_, .op = "ce background post", .bytes = bytes}),
                               ": the ", which, " buffer ", buffer, " is not the one mapped at set-up (",
                               rank_ == 0 ? buffers_.send : buffers_.recv, ") or the message does not fit it"));
  }

  void tear_down() {
    const Deadline deadline = Deadline::after_seconds(store_ != nullptr ? store_->timeout_seconds() : 60);
    if (rank_ == 0) {
      // Copies still in flight write into rank 1's memory: they finish (they wait for nothing) before it is let go.
      drain_stream(deadline);
      peer_recv_.reset();
      peer_flag_.reset();
      if (store_ != nullptr) try_step("say so", [&] { store_->set(key("unmapped"), "1"); });
    } else if (rank_ == 1) {
      if (exported_) try_step("wait for rank 0 to unmap", [&] { store_->get(key("unmapped")); });
      if (stream_) {
        try_step("release", [&] {
          if (stream_->query()) return;
          // Waits for messages that rank 0 never sent (a failed row): released, since rank 0 writes no more.
          auto releaser = device::make_stream(kind_, device_);
          releaser->write_value(my_flag(), sequence_);
          releaser->synchronize();
        });
      }
      drain_stream(deadline);
    }
    pending_.clear();
    spare_.clear();
    stream_.reset();
    flag_.reset();
  }

  void drain_stream(const Deadline& deadline) {
    if (stream_) try_step("drain", [&] { stream_->synchronize_until(deadline); });
  }

  /// Runs a teardown step; a failure is logged, not thrown (the run's outcome was settled before teardown).
  template <class Step>
  void try_step(const char* step, Step&& run) {
    try {
      run();
    } catch (const Error& e) {
      PICKLE_LOG(Warn, "bench", describe({.rank = rank_, .peer = 1 - rank_, .op = "ce background teardown"})
                                    << ": " << step << ": " << e.what());
    }
  }

  std::string background_;
  TrafficRanks ranks_;
  MemoryKind kind_;
  Store* store_ = nullptr;
  int rank_ = -1;
  int device_ = 0;
  TrafficBuffers buffers_;
  std::string detail_;
  std::unique_ptr<device::Allocation> flag_;                      // rank 1: the word rank 0 writes
  std::unique_ptr<device::ImportedMemory> peer_recv_, peer_flag_;  // rank 0: rank 1's buffer and flag
  bool exported_ = false;
  std::unique_ptr<device::Stream> stream_;
  std::uint32_t sequence_ = 0;  // messages posted so far: the number the next one writes or waits for, less one
  std::deque<std::unique_ptr<device::Event>> pending_;
  std::vector<std::unique_ptr<device::Event>> spare_;
};

}  // namespace

std::unique_ptr<Traffic> make_ce_traffic(std::string_view background, TrafficRanks ranks, MemoryKind kind) {
  return std::make_unique<CeTraffic>(background, ranks, kind);
}

}  // namespace pickle::bench
