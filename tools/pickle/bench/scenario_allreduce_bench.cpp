// allreduce-bench: seed 004's all_reduce_bench.py. Each trial is one in-place float allreduce of the whole payload
// after a barrier, timed like `pickle bench coll` (events from the enqueue to the end of the call on GPUs, host
// clock on host memory), the slowest rank's time; algbw = payload / time and busbw = algbw x 2(n-1)/n, in GB/s and
// Gbps (x 8), per trial and averaged over the trials as the seed prints them. Then one checked allreduce.
#include "core/format.hpp"
#include "scenario_runs.hpp"

namespace pickle::bench {

ScenarioRun run_allreduce_bench(CollContext& ctx, CollBackend& backend, Lockstep& lockstep,
                                const ScenarioOptions& options, const ScenarioPlan& plan) {
  ScenarioRun run;
  run.backend = std::string(backend.name());
  const std::size_t elements = plan.bytes / sizeof(float), bytes = elements * sizeof(float);
  const int n = ctx.world_size();
  const SumTrials trials_ms = run_sum_trials(ctx, backend, lockstep, options, DataType::F32, elements, "trial");
  run.wrong = trials_ms.wrong;
  std::vector<double> times_us, algbw, busbw;
  const double factor = busbw_factor(Collective::AllReduce, n);
  for (double ms : trials_ms.ms) {
    times_us.push_back(ms * 1e3);
    algbw.push_back(static_cast<double>(bytes) / (ms * 1e6));
    busbw.push_back(algbw.back() * factor);
  }
  if (lockstep.failed()) {
    run.error =
        cat(describe({.op = cat("allreduce-bench with ", run.backend), .bytes = bytes}), ": ", lockstep.error());
    run.wrong.reset();
    return run;
  }

  json::Value trials = json::Value::array();
  for (std::size_t t = 0; t < times_us.size(); ++t) {
    json::Value trial = json::Value::object();
    trial["time_us"] = times_us[t];
    trial["algbw_gbps"] = algbw[t];
    trial["busbw_gbps"] = busbw[t];
    trials.push_back(std::move(trial));
    run.lines.push_back(cat("trial ", t + 1, ": ", fixed(times_us[t] / 1e3, 3), " ms  algbw ",
                            fixed(algbw[t], 3), " GBps (", fixed(algbw[t] * 8, 1), " Gbps)  busbw ",
                            fixed(busbw[t], 3), " GBps (", fixed(busbw[t] * 8, 1), " Gbps)"));
  }
  const double alg = mean_of(algbw), bus = mean_of(busbw);
  run.result["bytes"] = bytes;
  run.result["dtype"] = "float";
  run.result["trials"] = std::move(trials);
  run.result["time_us"] = stats_json(times_us);
  run.result["algbw_gbps"] = stats_json(algbw);
  run.result["busbw_gbps"] = stats_json(busbw);
  run.result["algbw_gbit"] = alg * 8;
  run.result["busbw_gbit"] = bus * 8;
  // The seed's own words, with the averages over the trials.
  run.lines.push_back(cat("The average bandwidth of all_reduce with a ", decimal_size(bytes), " payload (",
                          times_us.size(), " trials, ", n, " ranks):"));
  run.lines.push_back(cat(" algbw: ", fixed(alg, 3), " GBps (", fixed(alg * 8, 1), " Gbps)"));
  run.lines.push_back(cat(" busbw: ", fixed(bus, 3), " GBps (", fixed(bus * 8, 1), " Gbps)"));
  return run;
}

}  // namespace pickle::bench
