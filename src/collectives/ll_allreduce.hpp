#pragma once
// The mailboxes' LL form (after NCCL's LL protocol, "low latency"): a small allreduce as one kernel whose stores carry
// their own flags. Each worker thread writes its 8 bytes of the input into every peer's LL cell as one 16-byte line
// (data, flag, data, flag) and then polls its lines of the peers' cells in its own GPU memory until both flags of
// each are the call's: a line whose flags it sees holds the data beside them (a 16-byte store may land as two 8-byte
// halves, never torn within one), so no fence, announcement or remote load stands between a peer's stores and the
// reduction. The data travels twice its size. Which calls take it, and the cells' layout: mailbox.hpp; the kernel's
// warps: ll_allreduce_cuda.cu.
//
// C++17 (nvcc compiles it too).

#include <cstddef>
#include <cstdint>

#include "collectives/reduce.hpp"

namespace pickle::coll {

/// An LL line: 16 bytes, of which 8 are data.
inline constexpr std::size_t kLlLineBytes = 16;
inline constexpr std::size_t kLlLineData = 8;

/// The lines that carry `bytes` of data (the last one partly, where bytes is not a multiple of 8); the kernel's too.
PICKLE_HD constexpr std::size_t ll_lines(std::size_t bytes) { return (bytes + kLlLineData - 1) / kLlLineData; }

/// The bytes of an LL cell that carries `bytes` of data.
constexpr std::size_t ll_cell_bytes_for(std::size_t bytes) { return ll_lines(bytes) * kLlLineBytes; }

/// A CTA of the LL kernel (31 warps of workers, one watcher) takes up to this many bytes of a call, a few lines per
/// worker: one CTA carried 16 KB as fast as the loads form and 32 KB slower (docs/results/2026-11-30g-h200x2.md).
/// Larger calls run on more CTAs, at most the gated kernels' (ll_ctas_for).
inline constexpr std::size_t kLlCtaBytes = std::size_t{16} << 10;

/// The largest LL call: 16 CTAs' shares. The cells are sized by PICKLE_ALLREDUCE_LL_MAX, not by this.
inline constexpr std::size_t kLlMaxBytes = std::size_t{256} << 10;

/// The CTAs of an LL call of `bytes`: one per kLlCtaBytes, at least one, at most `max_ctas` (PICKLE_REDUCE_CTAS and
/// kMaxGatedCtas, as the gated kernels). Each CTA then takes more lines where max_ctas is the limit.
constexpr int ll_ctas_for(std::size_t bytes, int max_ctas) {
  const std::size_t wanted = (bytes + kLlCtaBytes - 1) / kLlCtaBytes;
  const std::size_t limit = max_ctas < 1 ? 1 : static_cast<std::size_t>(max_ctas);
  return static_cast<int>(wanted < 1 ? 1 : (wanted < limit ? wanted : limit));
}

/// Every LL cell is written in full (all of kLlMaxBytes' lines, or the mailbox's limit's) at least once per this many
/// of its calls, so that no line of it is older than that: a line 2^32 - 1 calls old would carry the flag of the
/// current call. A cell's first LL call writes it in full too.
inline constexpr std::uint64_t kLlRefreshCalls = std::uint64_t{1} << 30;

/// The flag of mailbox call `number`: 1 to 2^32 - 1, never 0, which is what a cell's memory held before its first
/// call (and differs from the flag of the cell's previous calls, kMailboxDepth and more calls before).
constexpr std::uint32_t ll_flag(std::uint64_t number) { return static_cast<std::uint32_t>(number % 0xffffffffu) + 1; }

/// `refreshed` of a cell that no LL call has written in full yet.
inline constexpr std::uint64_t kLlNeverRefreshed = UINT64_MAX;

/// Whether LL call `number` writes its cell in full (kLlRefreshCalls), given when the cell was last (`refreshed`, per
/// cell), which it updates: the cell's first LL call, and the first at least kLlRefreshCalls after the last.
inline bool take_ll_refresh(std::uint64_t& refreshed, std::uint64_t number) {
  if (refreshed != kLlNeverRefreshed && number - refreshed < kLlRefreshCalls) return false;
  refreshed = number;
  return true;
}

/// When the LL kernel's watchers read the peers' host words that a failed pair releases. Not in a call's first
/// kQuietNs: a call whose peers are in step ends well before, and its watchers leave host memory alone (reads of it
/// over PCIe about once a microsecond from every CTA's watcher slowed calls on 8 CTAs from 11 to 17-22 us at 128 KB on
/// two H200s, docs/results/2026-11-30h-h200x2.md). Then 1 us apart, twice as far each time up to 64 us, so that a late
/// peer costs a few reads; a failed pair's release (seconds after the failure, by the host) ends the polls that much
/// later. Time is taken as differences, so a timer that jumps back reads at once; and every kTurnsPerForcedRead turns
/// of the watcher's loop it reads whatever the timer says (PTX does not promise that %globaltimer ticks steadily; each
/// turn sleeps up to 200 ns), so that a stalled timer cannot keep a failed pair's polls going for ever.
class ReleaseReads {
 public:
  static constexpr unsigned long long kQuietNs = 50'000;
  static constexpr unsigned long long kFirstGapNs = 1'000, kMaxGapNs = 64'000;
  static constexpr unsigned kTurnsPerForcedRead = 8192;

  PICKLE_HD explicit ReleaseReads(unsigned long long start_ns) : last_(start_ns) {}

  /// Whether to read at turn `turn` of the loop (1, 2, ...) at time `now_ns`; a read it asks for is taken as done.
  PICKLE_HD bool due(unsigned long long now_ns, unsigned turn) {
    if (now_ns - last_ < wait_ && turn % kTurnsPerForcedRead != 0) return false;
    last_ = now_ns;
    wait_ = gap_;
    gap_ = gap_ * 2 < kMaxGapNs ? gap_ * 2 : kMaxGapNs;
    return true;
  }

 private:
  unsigned long long last_;
  unsigned long long wait_ = kQuietNs;
  unsigned long long gap_ = kFirstGapNs;
};

/// Most ranks of an LL call: a gated mailbox's (kMaxGatePeers peers and this rank).
inline constexpr int kMaxLlRanks = kMaxGatePeers + 1;

/// One LL call of a rank.
struct LlAllreduce {
  DataType type = DataType::F32;
  ReduceOp op = ReduceOp::Sum;
  int nranks = 0;
  int rank = 0;
  const void* send = nullptr;
  void* recv = nullptr;  ///< may be send (in place)
  std::size_t count = 0;
  std::uint32_t flag = 0;          ///< ll_flag of the call
  std::uint32_t filled_count = 0;  ///< the filled count the call raises (a released host word is 2^30 beyond it)
  int ctas = 1;  ///< ll_ctas_for the call's bytes (the launch takes fewer where the GPU holds fewer at once)
  /// Lines written into each peer's cell: the data's, or more (zeros after the data) to write the cell in full.
  std::size_t push_lines = 0;
  /// Indexed by rank (this rank's entries unused): this rank's cell in the peer's mailbox memory (the peer's mapping
  /// here), the peer's cell in this rank's, and the peer's filled host word here, through which a failed pair
  /// releases the polls (the kernel's watcher reads it; the reduction then holds whatever the cell held, and the
  /// call's end check reports the failure).
  void* push_to[kMaxLlRanks] = {};
  const void* pull_from[kMaxLlRanks] = {};
  const std::uint32_t* release[kMaxLlRanks] = {};
};

/// Enqueues `call` (at most kLlMaxBytes) on the CUDA stream `cuda_stream` of `device`, on call.ctas CTAs (at most
/// kMaxGatedCtas; no more than the GPU holds of the LL kernel at once, resident_ctas), with `gate`'s pre-waits (the
/// peers have emptied the cells this call fills), announcements (the peers' filled words, written by the last CTA's
/// watcher once every worker has pushed its lines, behind a system-wide fence: the peers' hosts and the other forms
/// read them, the LL polls do not; with more than one CTA they need gate.ctas_published) and raises (the peers' emptied
/// words, at the end, by the last CTA: gate.ctas_done). CudaError on a launch failure. Only in CUDA builds.
void launch_ll_allreduce_cuda(const LlAllreduce& call, void* cuda_stream, int device, const ReduceGate& gate);
/// Loads every LL kernel on `device` (as load_reduce_kernels, and for the same reason). Only in CUDA builds.
void load_ll_allreduce_kernels(int device);

}  // namespace pickle::coll
