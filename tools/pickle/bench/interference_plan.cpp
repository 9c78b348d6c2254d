#include "interference_plan.hpp"

#include <algorithm>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

std::size_t BackgroundRoles::send_bytes(int rank, std::size_t bytes) const noexcept {
  if (p2p) return rank == 0 ? bytes : 0;
  return takes_part(rank) ? bytes / static_cast<std::size_t>(ranks) : 0;
}

std::size_t BackgroundRoles::recv_bytes(int rank, std::size_t bytes) const noexcept {
  return measures(rank) ? bytes : 0;  // p2p: rank 1; allgather: every rank gathers the whole size
}

InterferencePlan::InterferencePlan(const InterferenceOptions& options, int world_size)
    : backgrounds_(options.backgrounds), backends_(options.backends),
      allgather_ranks_(options.ranks > 0 ? options.ranks : world_size) {
  if (options.ranks > world_size) {
    throw InvalidArgument(cat("--ranks ", options.ranks, ": the job has ", world_size,
                              " ranks; the allgather can take at most all of them"));
  }
}

BackgroundRoles InterferencePlan::roles(std::string_view background) const noexcept {
  return background == "allgather" ? BackgroundRoles{.p2p = false, .ranks = allgather_ranks_} : BackgroundRoles{};
}

int InterferencePlan::ranks_taking_part() const noexcept {
  int ranks = 0;
  for (const auto& background : backgrounds_) ranks = std::max(ranks, roles(background).ranks);
  return ranks;
}

bool InterferencePlan::takes_part(int rank) const noexcept {
  return std::any_of(backgrounds_.begin(), backgrounds_.end(),
                     [&](const std::string& b) { return roles(b).takes_part(rank); });
}

bool InterferencePlan::measures(int rank) const noexcept {
  return std::any_of(backgrounds_.begin(), backgrounds_.end(),
                     [&](const std::string& b) { return roles(b).measures(rank); });
}

std::size_t InterferencePlan::send_need(int rank, std::size_t capacity) const noexcept {
  std::size_t need = 0;
  for (const auto& background : backgrounds_) need = std::max(need, roles(background).send_bytes(rank, capacity));
  return need;
}

std::size_t InterferencePlan::recv_need(int rank, std::size_t capacity) const noexcept {
  std::size_t need = 0;
  for (const auto& background : backgrounds_) need = std::max(need, roles(background).recv_bytes(rank, capacity));
  return need;
}

std::string InterferencePlan::skipped_sizes_note(const std::vector<std::size_t>& sizes) const {
  if (std::find(backgrounds_.begin(), backgrounds_.end(), "allgather") == backgrounds_.end()) return {};
  const BackgroundRoles allgather = roles("allgather");
  const auto skipped = std::count_if(sizes.begin(), sizes.end(), [&](std::size_t b) { return !allgather.runs_size(b); });
  if (skipped == 0) return {};
  return cat("allgather skips ", skipped, " of ", sizes.size(), " sizes: each of its ", allgather.ranks,
             " ranks contributes size/", allgather.ranks, " bytes, so a size must be a multiple of ", allgather.ranks);
}

std::size_t InterferencePlan::rows_per_foreground(const std::vector<std::size_t>& sizes) const {
  std::size_t rows = 0;
  for (const auto& background : backgrounds_) {
    const BackgroundRoles r = roles(background);
    rows += static_cast<std::size_t>(std::count_if(sizes.begin(), sizes.end(), [&](std::size_t b) {
      return r.runs_size(b);
    }));
  }
  return rows * backends_.size();
}

std::string interference_waiver(const InterferenceOptions& options, int local_ranks, int gpus) {
  if (options.share_gpus) return gpus >= 1 ? std::string() : cat("needs a CUDA GPU (found ", gpus, ")");
  const int needed = std::max(local_ranks, 2);
  if (gpus >= needed) return {};
  if (needed == 2) return cat("needs 2 CUDA GPUs (found ", gpus, ")");
  return cat("needs ", needed, " CUDA GPUs, one for each of the ", needed, " ranks taking part (found ", gpus,
             "); --share-gpus runs them round robin on fewer, as a functional check only");
}

std::string gpu_sharing_note(int local_ranks, int gpus) {
  if (gpus <= 0 || local_ranks <= gpus) return {};
  return cat("--share-gpus: ", local_ranks, " ranks share ", gpus, " GPU", gpus == 1 ? "" : "s",
             " (rank r on GPU r mod ", gpus, "); they compete for the same SMs and copy engines, so these are not "
             "interference figures: a functional run only");
}

}  // namespace pickle::bench
