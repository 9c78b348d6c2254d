#include "matrix.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "../self_launch.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"
#include "environment.hpp"
#include "lockstep.hpp"
#include "matrix_children.hpp"
#include "matrix_json.hpp"
#include "matrix_options.hpp"
#include "matrix_results.hpp"
#include "matrix_table.hpp"
#include "result_file.hpp"
#include "sizes.hpp"

namespace pickle::bench {
namespace {

/// Devices without 2 GPUs: enough host-memory "devices" for a matrix with every kind of cell (both directions of
/// three pairs), so that the orchestration runs and is tested on any machine.
constexpr int kHostDevices = 3;

/// Picks the memory, the devices and the size from the options and the GPUs this process sees. False when the
/// matrix is waived (cuda memory asked for, fewer than 2 GPUs). Counting GPUs initialises CUDA in this process but
/// creates no context on a device; the children are started by fork + exec, as `pickle bench p2p` starts its ranks.
bool plan_machine(MatrixReport& report) {
  const MatrixOptions& o = report.options;
  const int gpus = device::cuda_device_count();
  report.memory = !o.memory.empty() ? o.memory : (gpus >= 2 ? "cuda" : "host");
  report.size = o.size_for(report.memory);
  if (report.memory == "cuda") {
    if (gpus < 2) {
      report.waived = cat("--memory cuda needs 2 CUDA GPUs (found ", gpus,
                          gpus == 0 ? cat(": ", device::cuda_unavailable_reason()) : std::string(), ")");
      return false;
    }
    if (o.gpus > gpus) throw InvalidArgument(cat("--gpus ", o.gpus, ": only ", gpus, " GPUs are visible"));
    report.devices = o.gpus > 0 ? o.gpus : gpus;
    return true;
  }
  report.devices = o.gpus > 0 ? o.gpus : kHostDevices;
  // Each pair's child refuses a size whose buffers cannot fit (bench p2p's sweep_buffer_bytes): the same rule here
  // says it once, before the first pair, rather than once per pair (six times here, 56 on eight GPUs).
  (void)sweep_buffer_bytes(MemoryKind::Host, {report.size});
  if (o.gpus == 0) {
    report.notes.push_back(cat(gpus, " GPU(s) visible, not 2: ", kHostDevices, " devices on host memory, so that the ",
                               "orchestration runs; the numbers are memcpy between processes, not links"));
  }
  report.notes.push_back("host memory: CUDA_VISIBLE_DEVICES is still set per child (harmless) and recorded; NCCL "
                         "needs GPU memory, and the ce backend copies with memcpy");
  return true;
}

int orchestrate(MatrixReport& report) {
  const std::string& json_path = report.options.json_path;
  require_writable(json_path);
  if (plan_machine(report)) run_matrix_children(report);
  print_matrix_tables(report, stdout);
  // Only now, with every child done, may this process look at the GPUs' topology for the result file.
  if (!json_path.empty()) write_result_file(matrix_to_json(report), json_path);
  return report.exit_code();
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "pickle bench matrix: %s\n\n%s", message.c_str(), kMatrixUsage);
  return 2;
}

}  // namespace

int run_matrix(const std::vector<std::string>& args) {
  MatrixReport report;
  try {
    report.options = parse_matrix_options(args);
  } catch (const InvalidArgument& e) {
    return usage_error(plain_message(e));
  }
  if (report.options.help) {
    std::fputs(kMatrixUsage, stdout);
    return 0;
  }
  if (cli::running_as_rank()) {
    // Its children would take this job's rank variables for theirs.
    std::fprintf(stderr, "pickle bench matrix: starts its own process sets; run it alone, not as a rank of a "
                         "launcher (RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID is set)\n");
    return 2;
  }
  report.command = {"pickle", "bench", "matrix"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = utc_now();
  try {
    return orchestrate(report);
  } catch (const InvalidArgument& e) {
    return usage_error(plain_message(e));
  } catch (const Error& e) {
    std::fprintf(stderr, "pickle bench matrix: %s\n", plain_message(e).c_str());
    return 1;
  }
}

}  // namespace pickle::bench
