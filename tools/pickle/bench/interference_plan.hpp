#pragma once
// Who does what in `pickle bench interference`, as plain functions of the rank, so that the rank code stays a
// sequence of phases and the rules are tested without GPUs:
//   p2p        rank 0 sends messages of each size to rank 1; rank 1 runs and times the foreground. Ranks >= 2 idle.
//   allgather  ranks 0 .. N-1 (N: --ranks, else the job's world size) each contribute bytes/N and gather all `bytes`
//              (nccl-tests' convention: a size is the gathered total), and every one of them runs and times the
//              foreground (seed 001 item 6: "relative compute = the mean over the 8 ranks"). Ranks >= N idle.
// And whether this machine can give the figures: each rank taking part needs a GPU of its own, unless --share-gpus.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "interference_options.hpp"

namespace pickle::bench {

/// The roles of one background.
struct BackgroundRoles {
  bool p2p = true;  ///< p2p (rank 0 -> rank 1), else allgather
  int ranks = 2;    ///< the ranks taking part: 0 .. ranks-1

  bool takes_part(int rank) const noexcept { return rank >= 0 && rank < ranks; }
  /// Runs and times the foreground, and checks what it received: rank 1 of p2p, every rank of an allgather.
  bool measures(int rank) const noexcept { return p2p ? rank == 1 : takes_part(rank); }
  /// Bytes this rank sends from / receives into for one message of `bytes` (0: none).
  std::size_t send_bytes(int rank, std::size_t bytes) const noexcept;
  std::size_t recv_bytes(int rank, std::size_t bytes) const noexcept;
  /// Whether a message of `bytes` runs: an allgather needs a size that its ranks share evenly.
  bool runs_size(std::size_t bytes) const noexcept { return p2p || bytes % static_cast<std::size_t>(ranks) == 0; }
};

/// The roles of every background of one run.
class InterferencePlan {
 public:
  InterferencePlan() = default;
  /// `world_size`: the job's ranks. InvalidArgument when --ranks asks for more.
  InterferencePlan(const InterferenceOptions& options, int world_size);

  /// The roles of `background` ("p2p", "allgather").
  BackgroundRoles roles(std::string_view background) const noexcept;
  /// The allgather's rank count (N), whether or not it runs.
  int allgather_ranks() const noexcept { return allgather_ranks_; }
  /// The most ranks any requested background involves: the ranks that need a GPU.
  int ranks_taking_part() const noexcept;

  /// Over every requested background: whether `rank` takes part / runs the foreground, and the background buffers
  /// it needs for messages of up to `capacity` bytes (one buffer of each serves every background).
  bool takes_part(int rank) const noexcept;
  bool measures(int rank) const noexcept;
  std::size_t send_need(int rank, std::size_t capacity) const noexcept;
  std::size_t recv_need(int rank, std::size_t capacity) const noexcept;

  /// The report's note for sizes a background skips ("" when it runs them all).
  std::string skipped_sizes_note(const std::vector<std::size_t>& sizes) const;
  /// Rows the run will measure per foreground: every background x backend x size that runs.
  std::size_t rows_per_foreground(const std::vector<std::size_t>& sizes) const;

 private:
  std::vector<std::string> backgrounds_, backends_;
  int allgather_ranks_ = 2;
};

/// Why this machine cannot give the figures ("" when it can): `local_ranks` ranks of this host take part and
/// `gpus` GPUs are visible. Each rank needs a GPU of its own; with --share-gpus one GPU is enough. The text for
/// fewer than 2 GPUs is the suite's historical "needs 2 CUDA GPUs (found N)".
std::string interference_waiver(const InterferenceOptions& options, int local_ranks, int gpus);

/// The report's note when `local_ranks` ranks share `gpus` GPUs (--share-gpus); "" when each has its own.
std::string gpu_sharing_note(int local_ranks, int gpus);

}  // namespace pickle::bench
