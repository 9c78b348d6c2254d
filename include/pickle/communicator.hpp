#pragma once
/// pickle::Communicator: point-to-point data movement between the ranks of a job without stealing SMs.
/// On one host, data moves by copy engines straight into the peer's mapped memory, and completion is a stream
/// write-value into the peer's signal word: no kernel in the data path. The same code runs on host memory.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <pickle/bootstrap.hpp>
#include <pickle/collectives.hpp>
#include <pickle/memory.hpp>
#include <pickle/stream.hpp>

namespace pickle {

struct RequestState;

/// Counters of one transport, cumulative since the communicator was created.
struct TransportStats {
  std::uint64_t bytes = 0;        ///< payload bytes this rank wrote into peers' memory
  std::uint64_t operations = 0;   ///< puts and matched sends
  std::uint64_t ipc_opens = 0;    ///< peer allocations mapped (the 1-10 ms step)
  std::uint64_t ipc_closes = 0;   ///< of those, unmapped (closed) again because their allocation was freed
  std::uint64_t cache_hits = 0;   ///< transfers that found the peer allocation already mapped
  /// ipc on CUDA: sends whose completion write went to a completion lane, off the copy's stream, because they came
  /// right behind another send (PICKLE_IPC_COMPLETION, docs/p2p.md "Completion lanes")
  std::uint64_t completion_lane_writes = 0;
};
struct CommStats {
  TransportStats ipc;  ///< copy engine straight into the peer's mapped memory
  TransportStats shm;  ///< staged through pinned shared host memory (pairs without peer access)
  TransportStats net;  ///< libfabric RMA writes (ipc_opens: memory registrations, ipc_closes: those closed again,
                       ///< cache_hits: registrations reused)
  /// Bytes the collectives copied inside this rank's own memory: an out-of-place allgather's own block (none under
  /// PICKLE_ALLGATHER_OWN_COPY=relay), an out-of-place broadcast's at the root, an alltoall's own block, an in-place
  /// alltoall's blocks out of scratch, a world of one's result. On CUDA such a copy is SM work (docs/collectives.md,
  /// "Limits and costs"), the only SM use of allgather, broadcast and alltoall.
  std::uint64_t local_copy_bytes = 0;
};

/// The completion of one send or recv. Cheap to copy (shared state).
class Request {
 public:
  Request() = default;
  /// True once the operation completed; rethrows its error (PeerError, TimeoutError, InvalidArgument...).
  bool test();
  /// Blocks until completion, for at most PICKLE_TIMEOUT; never hangs.
  void wait();
  /// Makes later work on `stream` wait for this operation (the host does not block, except for a send whose
  /// receiver has not posted yet: its copy cannot be enqueued before the match). A send whose copy went onto
  /// `stream` itself (its `after` stream, matched at call time) is ordered already: no wait is enqueued.
  /// A failure lets the stream through all the same (a stream never hangs on a dead peer), so the operation's error
  /// (PeerError, InvalidArgument...) is thrown by the stream's next synchronize() or query() once it has passed this
  /// point: work queued after it may have run on a buffer that did not get its data.
  void on_stream(Stream& stream);
  std::size_t bytes() const noexcept;
  bool valid() const noexcept { return state_ != nullptr; }
  /// The shared state (opaque outside the library).
  RequestState* state() const noexcept { return state_.get(); }

  explicit Request(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<RequestState> state_;
};

/// Memory that every rank registered collectively; put() writes into a peer's part of it. Cheap to copy.
struct WindowState;
class Window {
 public:
  Window() = default;
  int id() const noexcept;
  /// Bytes that `rank` registered.
  std::size_t bytes(int rank) const;
  /// This rank's own registered pointer.
  void* local() const noexcept;

  explicit Window(std::shared_ptr<const WindowState> state) : state_(std::move(state)) {}
  const WindowState* state() const noexcept { return state_.get(); }

 private:
  std::shared_ptr<const WindowState> state_;
};

/// Memory from Communicator::alloc: of the communicator's kind, exportable cheaply (VMM on CUDA, memfd on host).
class Buffer {
 public:
  Buffer() = default;
  void* data() const noexcept;
  std::size_t bytes() const noexcept;
  MemoryKind kind() const noexcept;
  explicit operator bool() const noexcept { return impl_ != nullptr; }

  explicit Buffer(std::shared_ptr<void> impl, void* data, std::size_t bytes, MemoryKind kind)
      : impl_(std::move(impl)), data_(data), bytes_(bytes), kind_(kind) {}

 private:
  std::shared_ptr<void> impl_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::Host;
};

class Communicator {
 public:
  struct Options {
    std::optional<RankInfo> rank_info;  ///< unset: discover_rank_info()
    std::optional<MemoryKind> memory;   ///< unset: Cuda when every local rank has a GPU, else Host
    int device = -1;                    ///< CUDA ordinal; -1: the local rank (modulo the GPU count: ranks share GPUs
                                        ///< when CUDA memory is asked for on fewer GPUs than local ranks)
    double timeout_seconds = 0;         ///< 0: PICKLE_TIMEOUT
  };

  /// From RANK/WORLD_SIZE/... (torchrun, Slurm, Open MPI) and PICKLE_* variables.
  static Communicator from_env();
  explicit Communicator(Options options);
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  /// Finishes this rank's transfers, waits (bounded) until every rank is done with this one's memory, and says
  /// goodbye to the peers. Destroyed while an exception unwinds, it skips the wait and the goodbye: the peers see the
  /// channels close and fail what they have pending with this rank at once. Inline on purpose: "is an exception
  /// unwinding?" is asked in the application's code, of the C++ runtime that threw it.
  /// Streams given this communicator's work must be synchronized first. Where one is not, a wait of it that can never
  /// complete is released and makes its next synchronize throw PeerError, and the words it waits on stay allocated
  /// (docs/p2p.md, Errors).
  ~Communicator() {
    if (impl_) close(std::uncaught_exceptions() > 0);
  }

  int rank() const noexcept;
  int world_size() const noexcept;
  MemoryKind memory_kind() const noexcept;
  int device() const noexcept;
  const RankInfo& rank_info() const noexcept;

  /// A new stream of this communicator's kind and device.
  Stream make_stream();
  /// Memory that exports cheaply to peers (VMM on CUDA).
  Buffer alloc(std::size_t bytes);

  /// Collective: every rank registers [ptr, ptr + bytes) (any sizes; ptr may be inside a larger allocation) and maps
  /// every peer's allocation once. Mappings are cached per (peer, allocation), so registering again, or sending to,
  /// memory of an allocation already mapped opens nothing.
  Window register_memory(void* ptr, std::size_t bytes);

  /// One-sided, stream-ordered: copies `bytes` from `src` into `peer`'s registered memory at `dst_offset`.
  /// 0 bytes is a no-op. Out-of-range offsets or peers are InvalidArgument naming rank, peer, op and size.
  void put(Stream& stream, const Window& window, int peer, std::size_t dst_offset, const void* src, std::size_t bytes);
  /// Stream-ordered: after earlier work on `stream`, adds one to signal `slot` that `peer` keeps for this rank.
  /// The n-th call writes the count n (copy engines cannot add), so the signals of one (peer, slot) must reach the
  /// peer in the order of the calls: issue them on one stream, or order their streams (an event), as a stream that
  /// runs an older signal after a newer one moves the count back. Calls from several threads are safe.
  void signal(Stream& stream, int peer, int slot);
  /// Stream-ordered: later work on `stream` waits until `peer` signalled `slot` of this rank `expected` times in all.
  void wait(Stream& stream, int peer, int slot, std::uint32_t expected);
  /// Number of signal slots per peer.
  static constexpr int kSignalSlots = 64;

  /// Two-sided, tagged: the i-th send to `peer` with `tag` matches that peer's i-th recv from this rank with `tag`,
  /// whatever the order of calls on other tags. Sizes must match (else both sides fail with InvalidArgument).
  /// `after`: the copy starts only after the work enqueued on `after` so far (the producer of `ptr`).
  Request send(int peer, int tag, const void* ptr, std::size_t bytes, Stream* after = nullptr);
  /// Posts a receive into `ptr` (any memory of this communicator's kind, inside a registered or unregistered
  /// allocation). Completion is observable from the host (Request::wait) and from a stream (Request::on_stream).
  Request recv(int peer, int tag, void* ptr, std::size_t bytes);
  /// Receives that `peer` posted for this rank on `tag` and that no send of this rank has matched yet, as far as
  /// this rank has heard: posts travel on the control channel and arrive some microseconds after the peer's recv().
  /// A send issued while this is positive enqueues its copy at once, on the `after` stream (a copy and a write-value,
  /// nothing else); one issued before its receive is heard of is copied later, from a copy stream, when the post
  /// arrives. Latency-sensitive code posts receives ahead and may wait for this count before it sends.
  std::size_t posted_receives(int peer, int tag) const;

  /// Collectives: collective calls (every rank, same order, same counts), enqueued on `stream` after its earlier work;
  /// the results are ready once `stream` reaches that point (synchronize it or order later work on it). Any buffers of
  /// this communicator's kind (no registration or symmetric allocation needed); in-place when `send` is the rank's
  /// part of `recv` (allgather: recv + rank * count elements; others: send == recv). Counts follow NCCL's:
  /// allgather and alltoall `count` elements per rank, reduce_scatter `count` result elements per rank.
  /// Data moves by copy engines; reductions run on at most PICKLE_REDUCE_CTAS CTAs (host memory: on the stream's
  /// worker). Errors name rank, peer, operation and size; a dead peer fails every rank's call within PICKLE_TIMEOUT.
  void allgather(Stream& stream, const void* send, void* recv, std::size_t count, DataType type);
  void broadcast(Stream& stream, const void* send, void* recv, std::size_t count, DataType type, int root);
  void alltoall(Stream& stream, const void* send, void* recv, std::size_t count, DataType type);
  void reduce_scatter(Stream& stream, const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  void allreduce(Stream& stream, const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);

  /// The transport that joins this rank to `peer`: "ipc", "shm", "net" (or "self" for this rank). PICKLE_TRANSPORT forces
  /// one for every pair; otherwise ipc where peer access works, else shm.
  std::string transport(int peer) const;

  /// Collective: splits this communicator's ranks into groups, as MPI_Comm_split and ncclCommSplit do. Every rank
  /// calls it; ranks that pass the same `color` (>= 0) form a new communicator, ranked by `key`, then by their rank
  /// here. A rank that passes kNoColor joins none and gets an empty optional. The new communicator is independent
  /// (its own control channels, transports and collectives; the same memory kind and GPU) and uses this one's store;
  /// it may outlive this one. Its errors name ranks of the group. Every rank must split in the same order.
  std::optional<Communicator> split(int color, int key);
  static constexpr int kNoColor = -1;

  /// Host barrier across all ranks (through the store).
  void barrier();
  /// Counters of what this communicator moved (with the two-level collectives' own groups, docs/collectives.md).
  CommStats stats() const;

  struct Impl;

 private:
  explicit Communicator(Impl* impl) : impl_(impl) {}
  void close(bool unwinding) noexcept;
  struct ImplDeleter {
    void operator()(Impl* impl) const noexcept;
  };
  std::unique_ptr<Impl, ImplDeleter> impl_;
};

}  // namespace pickle
