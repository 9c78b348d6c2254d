#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "coll_step.hpp"
#include "core/format.hpp"
#include "p2p_report.hpp"
#include "scenario_runs.hpp"

namespace pickle::bench {
std::optional<double> slowest_ms(Lockstep& lockstep, std::string_view name, const std::function<double()>& fn) {
  auto outcome = lockstep.phase(name, [&] { return exact_payload(fn()); });
  if (!outcome.ok) return std::nullopt;
  return largest_payload(outcome);
}

double mean_of(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

json::Value stats_json(const std::vector<double>& values) {
  Summary s = summarize(values);
  json::Value v = json::Value::object();
  v["median"] = s.median;
  v["min"] = s.min;
  v["max"] = s.max;
  v["mean"] = mean_of(values);
  return v;
}

CollPattern scenario_pattern(const CollContext& ctx, Collective coll, DataType type, std::size_t elements, int root,
                             std::uint64_t salt) {
  CollPattern p;
  p.coll = coll;
  p.type = type;
  p.op = ReduceOp::Sum;
  p.root = root;
  p.nranks = ctx.world_size();
  p.shape = coll_shape(coll, elements * datatype_size(type), datatype_size(type), ctx.world_size());
  p.salt = salt;
  p.corrupt = ctx.corrupt();
  return p;
}

SumTrials run_sum_trials(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                         DataType type, std::size_t elements, std::string_view trial_phase) {
  std::byte* buffer = ctx.buffer(0);
  const CollCall call{.coll = Collective::AllReduce,
                      .send = buffer,
                      .recv = buffer,
                      .count = elements,
                      .type = type,
                      .op = ReduceOp::Sum};
  SumTrials out;
  lockstep.begin_step();
  lockstep.phase("load", [&] {
    ctx.load_inputs(scenario_pattern(ctx, Collective::AllReduce, type, elements, 0, 1), buffer, 0, elements);
    return std::string();
  });
  lockstep.phase("warm-up", [&] {
    for (int i = 0; i < options.warmup; ++i) backend.enqueue(ctx, call);
    ctx.stream().synchronize();
    return std::string();
  });
  for (int trial = 0; trial < options.iterations && !lockstep.failed(); ++trial) {
    auto ms =
        slowest_ms(lockstep, trial_phase, [&] { return time_calls(ctx, 1, [&] { backend.enqueue(ctx, call); }); });
    if (!ms) break;
    out.ms.push_back(*ms);
  }
  if (options.check && !lockstep.failed()) {
    out.wrong = summed(lockstep, "check", [&] {
      const CollPattern pattern = scenario_pattern(ctx, Collective::AllReduce, type, elements, 0, 2);
      ctx.load_inputs(pattern, buffer, 0, elements);
      backend.enqueue(ctx, call);
      ctx.stream().synchronize();
      return ctx.count_wrong(pattern, buffer, elements);
    });
  }
  return out;
}

CollPattern allreduce_pattern(const CollContext& ctx, std::size_t elements, std::uint64_t salt) {
  return scenario_pattern(ctx, Collective::AllReduce, DataType::F32, elements, 0, salt);
}

std::string decimal_size(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fixed(b / 1e9, 1) + " GB";
  if (b >= 1e6) return fixed(b / 1e6, 1) + " MB";
  if (b >= 1e3) return fixed(b / 1e3, 1) + " KB";
  return cat(bytes, " B");
}

}  // namespace pickle::bench
