#include "interference_measure.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/json.hpp"
#include "interference_data_check.hpp"
#include "interference_runner.hpp"
#include "interference_traffic.hpp"
#include "interference_window.hpp"
#include "pattern.hpp"
#include "sizes.hpp"

namespace pickle::bench {
namespace {

/// The background must have moved data for this long before the timed window opens.
constexpr std::int64_t kMinFlowNs = 50'000'000;

/// One measurement of the foreground with the run's warm-up and iterations, the GPU sampled where it can be.
ForegroundTiming time_once(RankState& s, Foreground& foreground) {
  const auto& o = *s.options;
  return time_foreground(foreground, s.stream->get(), o.warmup, o.warmup_ms / 1e3, o.iterations, s.deadline(),
                         s.telemetry.get());
}

/// The halted ranks' message counts (the payloads of the ranks taking part) -> the count every rank drains to.
std::uint64_t agreed_target(const PhaseOutcome& halted) {
  std::vector<std::uint64_t> posted;
  for (const auto& payload : halted.payloads) {
    if (!payload.empty()) posted.push_back(std::strtoull(payload.c_str(), nullptr, 10));
  }
  return drain_target(posted);
}

/// The phases of one row (see interference_rank.cpp's file comment), every rank alike; `what` names this rank's part
/// for errors. `runner` holds the background from "start" on. Returns the "check" phase's outcome: every measuring
/// rank's figures as JSON payloads.
PhaseOutcome run_row_phases(RankState& s, Traffic& traffic, const BackgroundRoles& roles, Foreground* foreground,
                            std::size_t bytes, const std::string& what, std::unique_ptr<TrafficRunner>& runner) {
  Lockstep& lockstep = *s.lockstep;
  const auto& o = *s.options;
  const bool takes_part = roles.takes_part(s.rank);
  const bool measures = roles.measures(s.rank);
  RankMeasurement mine;
  mine.rank = s.rank;
  ForegroundTiming with;
  std::uint64_t foreground_changed = 0;

  lockstep.begin_step();
  lockstep.phase("alone", [&] {
    if (!measures) return std::string();
    const ForegroundTiming alone = time_once(s, *foreground);
    mine.alone_before_ms = alone.ms_per_iteration;
    mine.telemetry_alone_before = alone.telemetry;
    mine.telemetry_source = s.telemetry_source;
    if (o.check) foreground_changed += foreground->count_changed(s.stream->get(), s.deadline());
    return std::string();
  });
  lockstep.phase("start", [&] {
    if (!takes_part) return std::string();
    if (measures) {
      cuda::check(cudaMemsetAsync(s.recv_ptr(), kPoisonByte, bytes, s.stream->get()), "cudaMemsetAsync", what);
      cuda::wait_stream(s.stream->get(), s.deadline(), what);
    }
    runner = std::make_unique<TrafficRunner>(traffic, s.send_ptr(), s.recv_ptr(), bytes, o.depth, s.device, what,
                                             s.timeout_seconds);
    runner->start();
    return std::string();
  });
  lockstep.phase("steady", [&] {
    if (!takes_part) return std::string();
    if (!measures) {
      runner->rethrow_failure();
      return std::string();
    }
    Deadline deadline = s.deadline();
    while (!background_steady(runner->completed(), runner->first_completion_ns(), now_ns(), o.depth, kMinFlowNs)) {
      runner->rethrow_failure();
      if (deadline.expired()) {
        throw TimeoutError(cat(what, ": the background completed ", runner->completed(),
                               " messages and did not reach steady state within PICKLE_TIMEOUT"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return std::string();
  });
  lockstep.phase("with", [&] {
    if (!measures) return std::string();
    with = time_once(s, *foreground);
    mine.with_ms = with.ms_per_iteration;
    mine.telemetry_with = with.telemetry;
    runner->rethrow_failure();
    if (o.check) foreground_changed += foreground->count_changed(s.stream->get(), s.deadline());
    return std::string();
  });
  auto halted = lockstep.phase("halt", [&] { return takes_part ? cat(runner->halt()) : std::string(); });
  const std::uint64_t target = halted.ok ? agreed_target(halted) : 0;
  lockstep.phase("drain", [&] {
    if (!takes_part) return std::string();
    runner->drain(target, s.deadline());
    // Each measuring rank proves that the background overlapped its own window, from its own completions.
    if (measures) mine.window = window_stats(runner->completions(), bytes, with.start_ns, with.end_ns);
    return std::string();
  });
  lockstep.phase("after", [&] {
    if (!measures) return std::string();
    const ForegroundTiming alone = time_once(s, *foreground);
    mine.alone_after_ms = alone.ms_per_iteration;
    mine.telemetry_alone_after = alone.telemetry;
    if (o.check) foreground_changed += foreground->count_changed(s.stream->get(), s.deadline());
    return std::string();
  });
  return lockstep.phase("check", [&] {
    if (!measures) return std::string();
    if (o.check) {
      mine.foreground_wrong = foreground_changed;
      mine.background_wrong = count_received_wrong(s, roles, bytes, what);
    }
    return rank_to_json(mine).dump();
  });
}

/// One row into `row`: every rank calls it with the same arguments. `foreground` is null on ranks that do not measure
/// this background. A LockstepBroken goes on, the row marked failed with it for the report that rank 0 still writes.
void run_row(RankState& s, Traffic& traffic, const BackgroundRoles& roles, Foreground* foreground,
             const std::string& foreground_name, std::size_t bytes, InterferenceRow& row) {
  row.foreground = foreground_name;
  row.background = std::string(traffic.background());
  row.backend = std::string(traffic.backend());
  row.bytes = bytes;
  const std::string operation =
      cat(row.backend, " ", row.background, roles.p2p ? std::string() : cat(" of ", roles.ranks, " ranks"),
          " background under ", foreground_name);
  const std::string what = describe({.rank = s.rank, .peer = roles.p2p && roles.takes_part(s.rank) ? 1 - s.rank : -1,
                                     .op = operation, .bytes = bytes});
  // Aborted and joined on the way out of this function, unless the ranks can no longer agree.
  std::unique_ptr<TrafficRunner> runner;
  PhaseOutcome checked;
  try {
    checked = run_row_phases(s, traffic, roles, foreground, bytes, what, runner);
  } catch (const LockstepBroken& e) {
    row.error = cat(describe({.op = operation, .bytes = bytes}), ": ", e.message());
    // Not joined: its thread may be blocked in a post that waits for the peer that is gone (end_broken_run).
    (void)runner.release();
    throw;
  }
  if (!checked.ok) {
    row.error = cat(describe({.op = operation, .bytes = bytes}), ": ", s.lockstep->error());
    return;
  }
  for (const auto& payload : checked.payloads) {
    if (!payload.empty()) row.ranks.push_back(rank_from_json(json::parse(payload)));
  }
}

/// Every foreground that is ok, at every size that the background runs, into `report`; the first failed row ends the
/// backend (`run` failed, with the row's error).
void measure_rows(RankState& s, InterferenceReport& report, Traffic& traffic, const BackgroundRoles& roles,
                  TrafficRun& run, Progress& progress) {
  for (std::size_t f = 0; f < report.foregrounds.size() && run.status == RunStatus::Ok; ++f) {
    if (report.foregrounds[f].status != RunStatus::Ok) continue;
    Foreground* foreground = roles.measures(s.rank) ? s.foregrounds[f].get() : nullptr;
    const std::string name = report.foregrounds[f].name;
    for (std::size_t bytes : report.sizes) {
      if (!roles.runs_size(bytes)) continue;  // noted once in the report
      InterferenceRow& row = report.rows.emplace_back();
      run_row(s, traffic, roles, foreground, name, bytes, row);
      progress.step(1, cat(run.backend, " ", run.background, " ", name, " ", short_size(bytes)));
      if (!row.error.empty()) {
        run.status = RunStatus::Failed;
        run.detail = row.error;
        traffic.abandon();
        break;
      }
    }
  }
}

/// Probes the backend, sets it up and measures its rows into `run` and `report`. False when the probe failed on some
/// rank: the backend is unavailable or failed there, and nothing was set up.
bool probe_and_measure(RankState& s, InterferenceReport& report, Traffic& traffic, const BackgroundRoles& roles,
                       TrafficRun& run, Progress& progress) {
  Lockstep& lockstep = *s.lockstep;
  const bool takes_part = roles.takes_part(s.rank);
  lockstep.begin_step();
  auto probed = lockstep.phase(cat("probe ", run.background, " ", run.backend), [&] {
    if (takes_part) traffic.probe();
    return std::string();
  });
  if (!probed.ok) {
    // Absent hardware or libraries are facts about this machine, not failures of the backend.
    run.status = probed.code == ErrorCode::Unavailable ? RunStatus::Unavailable : RunStatus::Failed;
    run.detail = probed.error;
    return false;
  }
  auto set_up = lockstep.phase(cat("setup ", run.background, " ", run.backend), [&] {
    if (takes_part) {
      const TrafficBuffers buffers{.send = s.send_ptr(), .recv = s.recv_ptr(), .send_bytes = s.send_bytes,
                                   .recv_bytes = s.recv_bytes};
      traffic.setup(*s.store, s.rank, s.device, buffers);
    }
    return traffic.detail();
  });
  if (!set_up.ok) {
    run.status = RunStatus::Failed;
    run.detail = cat("set-up: ", set_up.error);
    traffic.abandon();
  } else {
    run.detail = set_up.payloads[0];
    measure_rows(s, report, traffic, roles, run, progress);
  }
  return true;
}

}  // namespace

void run_traffic(RankState& s, InterferenceReport& report, const std::string& background, const std::string& backend,
                 Progress& progress) {
  Lockstep& lockstep = *s.lockstep;
  const BackgroundRoles roles = s.plan.roles(background);
  TrafficRun run;
  run.background = background;
  run.backend = backend;
  std::unique_ptr<Traffic> traffic =
      make_traffic(background, backend, {.ranks = roles.ranks, .local_ranks = std::min(roles.ranks, s.local_world_size)});
  bool probed = false;
  try {
    probed = probe_and_measure(s, report, *traffic, roles, run, progress);
  } catch (const LockstepBroken& e) {
    run.status = RunStatus::Failed;
    run.detail = e.message();
    report.traffic.push_back(run);
    // Not torn down: it may still have messages in flight with the peer that is gone, which a communicator's goodbye
    // would wait for (end_broken_run).
    (void)traffic.release();
    throw;
  }
  report.traffic.push_back(run);
  if (!probed) return;
  // Tear the backend down on every rank together (a communicator's goodbye needs its peers) before the next one.
  lockstep.begin_step();
  lockstep.phase(cat("teardown ", background, " ", backend), [&] {
    traffic.reset();
    return std::string();
  });
  traffic.reset();  // also when the phase was skipped
}

}  // namespace pickle::bench
