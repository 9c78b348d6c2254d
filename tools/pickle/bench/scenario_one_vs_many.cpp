// one-vs-many: seed 004's all_reduce_latency_comp.py. The same payload reduced as one big allreduce, or as --count
// allreduces of a buffer --count times smaller (the seed: 1 x 4 GB vs 1000 x 4 MB), in place, float sum. Each is
// timed like `pickle bench coll` (the big call alone; the small calls back to back as one stretch), -n repeats,
// median, slowest rank. Per-call overheads (launch, synchronisation, the control messages of a call) are paid
// once by the big allreduce and --count times by the small ones: the ratio shows what they cost.
#include "coll_step.hpp"
#include "core/format.hpp"
#include "scenario_runs.hpp"

namespace pickle::bench {

ScenarioRun run_one_vs_many(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                            const ScenarioPlan& plan) {
  ScenarioRun run;
  run.backend = std::string(backend.name());
  const std::size_t big = plan.bytes / sizeof(float), small = plan.small_bytes / sizeof(float);
  const int n = ctx.world_size();
  std::byte* big_buffer = ctx.buffer(0);
  std::byte* small_buffer = ctx.buffer(1);
  const CollCall one{.coll = Collective::AllReduce,
                     .send = big_buffer,
                     .recv = big_buffer,
                     .count = big,
                     .type = DataType::F32,
                     .op = ReduceOp::Sum};
  const CollCall many{.coll = Collective::AllReduce,
                      .send = small_buffer,
                      .recv = small_buffer,
                      .count = small,
                      .type = DataType::F32,
                      .op = ReduceOp::Sum};

  lockstep.begin_step();
  lockstep.phase("load", [&] {
    ctx.load_inputs(allreduce_pattern(ctx, big, 1), big_buffer, 0, big);
    ctx.load_inputs(allreduce_pattern(ctx, small, 2), small_buffer, 0, small);
    return std::string();
  });
  lockstep.phase("warm-up", [&] {
    for (int i = 0; i < options.warmup; ++i) {
      backend.enqueue(ctx, one);
      backend.enqueue(ctx, many);
    }
    ctx.stream().synchronize();
    return std::string();
  });
  std::vector<double> one_us, many_us;
  for (int repeat = 0; repeat < options.iterations && !lockstep.failed(); ++repeat) {
    auto a = slowest_ms(lockstep, "one", [&] { return time_calls(ctx, 1, [&] { backend.enqueue(ctx, one); }); });
    if (!a) break;
    auto b =
        slowest_ms(lockstep, "many", [&] { return time_calls(ctx, plan.count, [&] { backend.enqueue(ctx, many); }); });
    if (!b) break;
    one_us.push_back(*a * 1e3);
    many_us.push_back(*b * 1e3);
  }
  if (options.check && !lockstep.failed()) {
    run.wrong = summed(lockstep, "check", [&] {
      CollPattern big_pattern = allreduce_pattern(ctx, big, 3), small_pattern = allreduce_pattern(ctx, small, 4);
      ctx.load_inputs(big_pattern, big_buffer, 0, big);
      ctx.load_inputs(small_pattern, small_buffer, 0, small);
      backend.enqueue(ctx, one);
      backend.enqueue(ctx, many);
      ctx.stream().synchronize();
      return ctx.count_wrong(big_pattern, big_buffer, big) + ctx.count_wrong(small_pattern, small_buffer, small);
    });
  }
  if (lockstep.failed()) {
    run.error =
        cat(describe({.op = cat("one-vs-many with ", run.backend), .bytes = plan.bytes}), ": ", lockstep.error());
    run.wrong.reset();
    return run;
  }

  const double factor = busbw_factor(Collective::AllReduce, n);
  const double one_median = summarize(one_us).median, many_median = summarize(many_us).median;
  const double total = static_cast<double>(big * sizeof(float));
  const double one_alg = total / (one_median * 1e3);
  const double many_alg = static_cast<double>(small * sizeof(float)) * plan.count / (many_median * 1e3);
  const double ratio = one_median > 0 ? many_median / one_median : 0;
  auto part = [&](const std::vector<double>& times, std::size_t bytes, int calls, double alg) {
    json::Value v = json::Value::object();
    v["bytes"] = bytes;
    v["calls"] = calls;
    v["time_us"] = stats_json(times);
    v["algbw_gbps"] = alg;
    v["busbw_gbps"] = alg * factor;
    return v;
  };
  run.result["one"] = part(one_us, big * sizeof(float), 1, one_alg);
  run.result["many"] = part(many_us, small * sizeof(float), plan.count, many_alg);
  run.result["ratio"] = ratio;
  auto line = [&](int calls, std::size_t bytes, double us, double alg) {
    return cat(calls, " x ", decimal_size(bytes), ": ", fixed(us / 1e3, 3), " ms  algbw ", fixed(alg, 3),
               " GBps (", fixed(alg * 8, 1), " Gbps)  busbw ", fixed(alg * factor, 3), " GBps (",
               fixed(alg * factor * 8, 1), " Gbps)");
  };
  run.lines.push_back(line(1, big * sizeof(float), one_median, one_alg));
  run.lines.push_back(line(plan.count, small * sizeof(float), many_median, many_alg));
  run.lines.push_back(cat(plan.count, " x ", decimal_size(small * sizeof(float)), " / 1 x ",
                          decimal_size(big * sizeof(float)), " = ", fixed(ratio, 2), " (time, median of ",
                          one_us.size(), " repeats)"));
  return run;
}

}  // namespace pickle::bench
