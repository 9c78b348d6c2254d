// switchml: seed 002, SwitchML's allreduce_benchmark against NCCL. The seed ran SwitchML's in-network aggregation
// (a Tofino switch, or its software stand-in) on four nodes and printed, per job of one int32 allreduce of
// --tensor-numel elements, "Job(s) #i# finished. Duration: #ns# ns Goodput: #Gbps# Gbps.", then Min, Max, Median,
// Mean and Std dev. Here each backend runs the same jobs: `switch` (pickle's software switch, SwitchML's protocol
// on a thread of rank 0), and pickle's and NCCL's allreduce for comparison. A job is one in-place int32 sum, timed
// like allreduce-bench (the slowest rank's, from the first enqueue to the end of the call); Goodput = the tensor's
// bits / Duration, as SwitchML computes it. Then one checked job.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/format.hpp"
#include "scenario_runs.hpp"

namespace pickle::bench {
namespace {

std::string general(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

ScenarioRun run_switchml(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                         const ScenarioPlan& plan) {
  ScenarioRun run;
  run.backend = std::string(backend.name());
  const std::size_t elements = plan.bytes / sizeof(std::int32_t), bytes = elements * sizeof(std::int32_t);
  const SumTrials jobs_ms = run_sum_trials(ctx, backend, lockstep, options, DataType::I32, elements, "job");
  run.wrong = jobs_ms.wrong;
  run.lines.push_back(cat("Submitting ", options.warmup, " warmup jobs."));
  run.lines.push_back("Warmup finished.");
  run.lines.push_back(cat("Submitting ", options.iterations, " jobs."));
  std::vector<double> durations_ns;
  const double bits = static_cast<double>(bytes) * 8;
  for (double ms : jobs_ms.ms) {
    durations_ns.push_back(ms * 1e6);
    const long long whole_ns = std::llround(std::trunc(durations_ns.back()));  // as the summary below prints it
    run.lines.push_back(cat("Job(s) #", durations_ns.size() - 1, "# finished. Duration: #", whole_ns, "# ns Goodput: #",
                            general(bits / durations_ns.back()), "# Gbps."));
  }
  run.result["stats"] = backend.stats();  // this rank's (rank 0's in the report: the switch runs there)
  if (lockstep.failed()) {
    run.error = cat(describe({.op = cat("switchml with ", run.backend), .bytes = bytes}), ": ", lockstep.error());
    run.wrong.reset();
    return run;
  }
  // The seed's summary: the median is the upper middle job, the mean is truncated, the deviation the population's.
  std::vector<double> sorted = durations_ns;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0, deviation = 0;
  for (double d : sorted) mean += d / static_cast<double>(sorted.size());
  for (double d : sorted) deviation += (d - mean) * (d - mean) / static_cast<double>(sorted.size());
  deviation = std::sqrt(deviation);
  const double median = sorted[sorted.size() / 2];
  run.lines.push_back("All jobs finished.");
  auto summary = [&](const char* word, double ns) {
    run.lines.push_back(cat(word, " ", std::llround(std::trunc(ns)), " ns ", general(bits / ns), " Gbps"));
  };
  summary("Min", sorted.front());
  summary("Max", sorted.back());
  summary("Median", median);
  summary("Mean", std::trunc(mean));
  run.lines.push_back(cat("Std dev ", general(deviation), " ns"));

  json::Value jobs = json::Value::array();
  for (double d : durations_ns) {
    json::Value j = json::Value::object();
    j["duration_ns"] = d;
    j["goodput_gbps"] = bits / d;
    jobs.push_back(std::move(j));
  }
  json::Value duration = json::Value::object();
  duration["min"] = sorted.front();
  duration["max"] = sorted.back();
  duration["median"] = median;
  duration["mean"] = mean;
  duration["stddev"] = deviation;
  run.result["numel"] = elements;
  run.result["bytes"] = bytes;
  run.result["dtype"] = "int32";
  run.result["jobs"] = std::move(jobs);
  run.result["duration_ns"] = std::move(duration);
  run.result["goodput_gbps"] = bits / median;  // at the median job
  return run;
}

}  // namespace pickle::bench
