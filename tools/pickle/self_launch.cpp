#include "self_launch.hpp"

#include <unistd.h>

#include <pickle/error.hpp>

#include "core/env.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"
#include "launcher.hpp"

namespace pickle::cli {

bool running_as_rank() {
  return env::foreign("RANK") || env::foreign("OMPI_COMM_WORLD_RANK") || env::foreign("SLURM_PROCID");
}

int relaunch_as_ranks(int nranks, const std::string& command, const std::vector<std::string>& args,
                      bool prefix_output) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) throw SystemError("readlink /proc/self/exe", errno);
  self[n] = '\0';
  launch::LaunchOptions options;
  options.nproc = nranks;
  options.prefix = prefix_output;
  options.quiet_exits = true;  // our ranks say why they fail; "rank 0 exited with code 1" read like a crash
  options.command = {self, command};
  options.command.insert(options.command.end(), args.begin(), args.end());
  return launch::run(options);
}

void refuse_cuda_memory_without_gpu(const std::string& memory) {
  // Counting GPUs initialises CUDA in this process; that is safe because the ranks are started by fork + exec.
  if (memory == "cuda" && device::cuda_device_count() == 0) {
    throw UnavailableError(cat("--memory cuda needs a GPU, and this machine has none (", device::cuda_unavailable_reason(),
                               "); leave --memory out, or use --memory host"));
  }
}

int default_rank_count(int requested, const std::string& memory, std::string& why) {
  refuse_cuda_memory_without_gpu(memory);
  if (requested > 0) {
    why = cat(requested, " ranks (--ranks)");
    return requested;
  }
  int gpus = device::cuda_device_count();
  if (gpus >= 2) {
    why = cat(gpus, " ranks, one per GPU");
    return gpus;
  }
  why = gpus == 1 ? std::string("only 1 GPU: running 2 ranks (on host memory, unless --memory cuda makes them share "
                                "the GPU)")
                  : cat("no GPU (", device::cuda_unavailable_reason(), "): running 2 host-memory ranks");
  return 2;
}

}  // namespace pickle::cli
