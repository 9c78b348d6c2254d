#pragma once
// Which GPU a rank of a benchmark uses, and making it current on the calling thread, as every rank must before NCCL
// (which uses the current device) or any other CUDA work: rank r of a host uses GPU r, or GPU r modulo the GPU count
// when `--memory cuda` asks for GPU memory on fewer GPUs than ranks. Ranks that share a GPU move data between two
// processes on one GPU: a check that the GPU code paths work, not a measurement of a link (and NCCL refuses it).

#include <algorithm>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

namespace pickle::bench {

/// The GPU of the rank with this local rank: local_rank modulo the number of GPUs (0 without GPUs).
int rank_device(int local_rank);

/// Empty when each of `local_ranks` ranks has a GPU of its own; otherwise why NCCL cannot take part ("N ranks share
/// M GPU(s) (<cause>): NCCL needs a GPU per rank"), `cause` naming what made them share.
std::string nccl_gpu_sharing_problem(int local_ranks,
                                     std::string_view cause = "--memory cuda on fewer GPUs than ranks");

/// What tells this rank's GPU apart from every other rank's GPU: the host as pickle's communicator tells hosts apart,
/// and the GPU's PCI bus id (empty in a build without CUDA).
std::string gpu_identity(int device);

/// Given each rank's gpu_identity (empty for ranks without a GPU in the run), a note for the table and the JSON when
/// two ranks share one GPU, else empty: their transfers are copies inside one GPU by processes that take turns on it,
/// which checks the GPU code paths and measures no link.
std::string shared_gpu_note(const std::vector<std::string>& identities);

/// Records a note that ranks share a GPU (shared_gpu_note, or interference's own) in a suite's report: first among
/// its notes, so that the table prints it above the figures it qualifies, and `gpus_shared` for the result file.
/// Nothing when `note` is empty.
template <class Report>
void record_shared_gpu(Report& report, std::string note) {
  if (note.empty()) return;
  report.gpus_shared = true;
  // push_back + rotate rather than insert(begin()): GCC 13 reports a false "potential null pointer dereference"
  // (-Werror=null-dereference) inside vector<string>::insert inlined here.
  report.notes.push_back(std::move(note));
  std::rotate(report.notes.rbegin(), report.notes.rbegin() + 1, report.notes.rend());
}

/// cudaSetDevice(device): binds the device's primary context to this thread, for pickle's device layer and for
/// NCCL alike (each has its own CUDA runtime; they meet in the driver's current context). CudaError on failure,
/// UnavailableError in a build without CUDA.
void bind_cuda_device(int device);

}  // namespace pickle::bench
