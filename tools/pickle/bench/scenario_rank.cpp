#include "scenario_rank.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "coll_backend.hpp"
#include "coll_context.hpp"
#include "coll_session.hpp"
#include "cuda_device.hpp"
#include "core/format.hpp"
#include "environment.hpp"
#include "lockstep.hpp"
#include "result_file.hpp"
#include "scenario_report.hpp"
#include "scenario_runs.hpp"

namespace pickle::bench {
namespace {

/// Each of flags' two buffers: room for the lengths and the padded objects of many ranks.
constexpr std::size_t kFlagsScratchBytes = std::size_t{64} << 10;

std::size_t whole_floats(std::size_t bytes) { return bytes / sizeof(float) * sizeof(float); }

/// Allocates the scenario's buffers on every rank and settles its sizes to what every rank obtained (the payload
/// is capped by free GPU memory, or on host memory by a quarter of MemAvailable shared by the local ranks, with a
/// note).
ScenarioPlan allocate_plan(Lockstep& lockstep, CollContext& ctx, const ScenarioOptions& options,
                           std::vector<std::string>& notes) {
  const bool cuda = ctx.kind() == MemoryKind::Cuda;
  ScenarioPlan plan;
  std::size_t wanted = 0, floor = 0, extra = 0;
  int buffers = 1;
  switch (options.scenario) {
    case Scenario::AllreduceBench:
      wanted = whole_floats(options.bytes != 0 ? options.bytes : cuda ? kSeedPayloadBytes : kScenarioHostPayloadBytes);
      floor = std::min<std::size_t>(wanted, std::size_t{1} << 20);
      break;
    case Scenario::OneVsMany:
      plan.small_bytes = whole_floats(options.small_bytes != 0 ? options.small_bytes
                                      : cuda                   ? kSeedSmallBytes
                                                               : kScenarioHostSmallBytes);
      plan.count = options.count;
      wanted = plan.small_bytes * static_cast<std::size_t>(plan.count);
      floor = extra = plan.small_bytes;
      break;
    case Scenario::Flags:
      wanted = floor = plan.scratch_bytes = kFlagsScratchBytes;
      buffers = 2;
      break;
    case Scenario::TpPp:
      wanted = floor = plan.bytes = tp_pp_buffer_bytes(options);
      break;
    case Scenario::SwitchMl:
      wanted = floor = plan.bytes = options.numel * sizeof(std::int32_t);
      break;
  }
  const std::size_t tried =
      first_buffer_bytes(ctx.kind(), floor, wanted, buffers + (extra > 0 ? 1 : 0), ctx.store().self().local_world_size);
  auto allocated = lockstep.phase("allocate", [&] { return cat(ctx.allocate(tried, floor, buffers, extra)); });
  require_agreed(allocated, "allocating buffers");
  std::size_t got = tried;
  for (const auto& payload : allocated.payloads)
    got = std::min<std::size_t>(got, std::strtoull(payload.c_str(), nullptr, 10));
  const std::string where = cuda ? "free GPU memory" : "a quarter of MemAvailable";
  if (options.scenario == Scenario::AllreduceBench) {
    plan.bytes = whole_floats(got);
    if (plan.bytes < wanted) {
      notes.push_back(cat("payload reduced to ", plan.bytes, " bytes: ", wanted, " bytes do not fit in ", where));
    }
  } else if (options.scenario == Scenario::OneVsMany) {
    plan.count = static_cast<int>(std::max<std::size_t>(1, got / plan.small_bytes));
    plan.bytes = plan.small_bytes * static_cast<std::size_t>(plan.count);
    if (plan.count < options.count) {
      notes.push_back(cat("count reduced to ", plan.count, ": ", options.count, " x ", plan.small_bytes,
                          " bytes do not fit in ", where));
    }
  }
  return plan;
}

json::Value plan_json(const ScenarioOptions& options, const ScenarioPlan& plan) {
  json::Value v = json::Value::object();
  switch (options.scenario) {
    case Scenario::AllreduceBench:
      v["bytes"] = plan.bytes;
      v["dtype"] = "float";
      break;
    case Scenario::OneVsMany:
      v["bytes"] = plan.bytes;
      v["small_bytes"] = plan.small_bytes;
      v["count"] = plan.count;
      v["dtype"] = "float";
      break;
    case Scenario::Flags:
      v["rounds"] = options.iterations;
      break;
    case Scenario::TpPp: {
      v["model"] = options.model;
      v["layers"] = options.layers;
      json::Value batches = json::Value::array(), seqs = json::Value::array();
      for (int b : options.batches) batches.push_back(b);
      for (int q : options.seqs) seqs.push_back(q);
      v["batches"] = std::move(batches);
      v["seqs"] = std::move(seqs);
      v["buffer_bytes"] = plan.bytes;
      break;
    }
    case Scenario::SwitchMl:
      v["numel"] = options.numel;
      v["bytes"] = plan.bytes;
      v["dtype"] = "int32";
      break;
  }
  return v;
}

ScenarioRun run_one(CollContext& ctx, CollBackend& backend, Lockstep& lockstep, const ScenarioOptions& options,
                    const ScenarioPlan& plan) {
  switch (options.scenario) {
    case Scenario::AllreduceBench:
      return run_allreduce_bench(ctx, backend, lockstep, options, plan);
    case Scenario::Flags:
      return run_flags(ctx, backend, lockstep, options, plan);
    case Scenario::OneVsMany:
      return run_one_vs_many(ctx, backend, lockstep, options, plan);
    case Scenario::TpPp:
      return run_tp_pp(ctx, backend, lockstep, options, plan);
    case Scenario::SwitchMl:
      return run_switchml(ctx, backend, lockstep, options, plan);
  }
  throw Error(ErrorCode::Internal, "unknown scenario");
}

/// The defaults that depend on the memory kind: tp-pp's model (the GPU one, or the tiny one on host memory) and
/// prompt lengths, switchml's tensor; and tp-pp's rank count: TP=2 and PP=2 take exactly two.
ScenarioOptions settled(ScenarioOptions options, MemoryKind kind, const RankInfo& self) {
  const bool cuda = kind == MemoryKind::Cuda;
  if (options.scenario == Scenario::SwitchMl && options.numel == 0) options.numel = cuda ? 1048576 : 262144;
  if (options.scenario != Scenario::TpPp) return options;
  if (options.model.empty()) options.model = cuda ? "llama2-7b" : "tiny";
  if (options.layers == 0) options.layers = model_shape(options.model).layers;
  if (options.seqs.empty()) options.seqs = cuda ? std::vector<int>{512, 2048} : std::vector<int>{8, 32};
  if (self.world_size != 2) {
    throw AgreedFailure(ErrorCode::InvalidArgument,
                        cat("tp-pp runs on 2 ranks (TP=2, PP=2); this run has ", self.world_size));
  }
  return options;
}

int run(const ScenarioOptions& given, const std::vector<std::string>& args, const RankInfo& self) {
  Store store(self);
  Lockstep lockstep(store);
  const MemoryKind kind = agree_on_memory(lockstep, self, given.memory, given.json_path);
  const ScenarioOptions options = settled(given, kind, self);

  ScenarioReport report;
  report.options = options;
  report.command = {"pickle", "bench", "scenario"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.memory = kind;
  report.world_size = self.world_size;
  report.started_utc = utc_now();

  std::string shared_gpu;
  std::unique_ptr<CollContext> ctx = make_context(lockstep, store, kind, shared_gpu);
  record_shared_gpu(report, std::move(shared_gpu));
  const ScenarioPlan plan = allocate_plan(lockstep, *ctx, options, report.notes);
  report.plan = plan_json(options, plan);
  // tp-pp's buffer holds weights, which no check reads back.
  if (self.rank == 0 && plan.bytes >= (std::size_t{1} << 30) && options.check && options.scenario != Scenario::TpPp) {
    std::fprintf(stderr, "bench scenario: %s payload; its check takes a few seconds per backend\n",
                 decimal_size(plan.bytes).c_str());
  }

  auto measure = [&](CollBackend& backend, std::size_t) {
    ScenarioRun result = run_one(*ctx, backend, lockstep, options, plan);
    std::string error = result.error;
    report.runs.push_back(std::move(result));
    return error;
  };
  const auto write_report = [&] {
    print_scenario(report, stdout);
    if (!options.json_path.empty()) write_result_file(scenario_to_json(report), options.json_path);
    WrongData wrong;
    for (const auto& run : report.runs) wrong.add(run.wrong.value_or(0), cat("backend ", run.backend));
    say_wrong_data("scenario", wrong, options.scenario == Scenario::Flags ? "elements or objects" : "elements",
                   stdout);
  };
  run_backends(ctx, lockstep, "scenario", options.backends, measure, report.backends, write_report);
  return report.exit_code();
}

}  // namespace

int run_scenario_rank(const ScenarioOptions& options, const std::vector<std::string>& args) {
  return run_coll_session("scenario", [&](const RankInfo& self) { return run(options, args, self); });
}

}  // namespace pickle::bench
