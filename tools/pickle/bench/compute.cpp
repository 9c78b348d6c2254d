#include "compute.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "compute_options.hpp"
#include "compute_report.hpp"
#include "core/format.hpp"
#include "device/backends.hpp"
#include "lockstep.hpp"
#include "result_file.hpp"
#if PICKLE_HAVE_CUDA
#include "compute_gpu.hpp"
#endif

namespace pickle::bench {
namespace {

/// Prints the table, writes --json and returns the run's exit code.
int finish(const ComputeReport& report) {
  print_compute_table(report, stdout);
  if (!report.options.json_path.empty()) {
    write_result_file(compute_to_json(report), report.options.json_path);
  }
  return report.exit_code();
}

}  // namespace

int run_compute(const std::vector<std::string>& args) {
  ComputeReport report;
  try {
    report.options = parse_compute_options(args);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench compute: %s\n\n%s", plain_message(e).c_str(), kComputeUsage);
    return 2;
  }
  if (report.options.help) {
    std::fputs(kComputeUsage, stdout);
    return 0;
  }
  report.command = {"pickle", "bench", "compute"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = utc_now();
  const int gpus = device::cuda_device_count();
  if (gpus == 0) {
    // nvbandwidth's filter(): missing hardware is a waiver, with the reason, not a failure.
    report.waived = "needs a CUDA GPU (found 0)";
    if (std::string why = device::cuda_unavailable_reason(); !why.empty()) report.notes.push_back(cat("no GPU: ", why));
    return finish(report);
  }
  if (report.options.device >= gpus) {
    std::fprintf(stderr, "pickle bench compute: --device %d: this machine has %d CUDA GPU%s (0 to %d)\n",
                 report.options.device, gpus, gpus == 1 ? "" : "s", gpus - 1);
    return 2;
  }
  try {
    require_writable(report.options.json_path);  // before the foregrounds' minutes of measuring
  } catch (const Error& e) {
    std::fprintf(stderr, "pickle bench compute: %s\n", plain_message(e).c_str());
    return 1;
  }
#if PICKLE_HAVE_CUDA
  measure_compute(report);
#endif
  return finish(report);
}

}  // namespace pickle::bench
