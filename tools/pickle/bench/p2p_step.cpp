#include "p2p_step.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "pattern.hpp"

namespace pickle::bench {
bool fits_behind_gate(const device::Stream& stream, long long ops) {
  constexpr long long kRepeatOps = 4;         // the send window's copy, the gate's wait, the start and stop records
  constexpr long long kMostEntriesPerOp = 2;  // a host callback
  if (ops > kMaxGatedOps) return false;
  const auto depth = static_cast<long long>(stream.queue_depth());
  return depth == 0 || (ops + kRepeatOps) * kMostEntriesPerOp <= depth;
}

StepResult run_step(P2pContext& ctx, P2pBackend& backend, Lockstep& lockstep, const P2pOptions& options, Mode mode,
                    std::size_t bytes) {
  const std::string name(backend.name());
  StepResult result;
  result.backend = name;
  result.mode = mode;
  result.bytes = bytes;
  result.iterations = options.iterations;
  const int rank = ctx.rank();
  const bool active = ctx.active();
  const bool sender = active && (mode != Mode::Uni || rank == 0);
  const bool receiver = active && (mode != Mode::Uni || rank == 1);
  const bool times = active && backend.times(mode, rank);
  // Host streams bound their queues as CUDA's do (PICKLE_HOST_STREAM_DEPTH). Until 2026-11-29 host memory was always
  // gated, from when host queues had no bound: the enqueue blocked for good behind the closed gate from about -n 340
  // (pickle, bi), and from -n 205 once on_stream left a check behind each wait; then, until the depth was asked,
  // a depth below about 128 blocked it at the default -n 20. Every rank's stream must hold them (two hosts may set
  // different depths): the ranks agree, and a rank outside the pair has no stream and no gate.
  const bool fits = !active || fits_behind_gate(ctx.stream(), static_cast<long long>(backend.ops_per_iteration(mode)) *
                                                                  options.iterations);

  lockstep.begin_step();
  auto prepared = lockstep.phase("prepare", [&] {
    if (active) ctx.poison_recv(bytes);
    return std::string(fits ? "gated" : "ungated");
  });
  result.gated = std::ranges::none_of(prepared.payloads, [](const std::string& p) { return p == "ungated"; });
  lockstep.phase("warm-up", [&] {
    if (!active || options.warmup == 0) return std::string();
    if (sender) ctx.load_send_window(bytes, window_shift(name, mode, bytes, -1, rank));
    backend.enqueue(ctx, mode, bytes, options.warmup);
    ctx.stream().synchronize();
    return std::string();
  });

  // Mappings made during warm-up are the set-up cost; any made while timing would be in the measurement.
  const std::optional<std::uint64_t> opens_before = active ? backend.mapping_opens() : std::nullopt;
  const std::optional<std::uint64_t> lane_writes_before = active ? backend.completion_lane_writes() : std::nullopt;
  for (int repeat = 0; repeat < options.repeats && !lockstep.failed(); ++repeat) {
    const std::uint32_t gate = ctx.next_gate();
    lockstep.phase("enqueue", [&] {
      if (!active) return std::string();
      if (sender) ctx.load_send_window(bytes, window_shift(name, mode, bytes, repeat, rank));
      if (times && result.gated) ctx.wait_gate(gate);
      if (times) ctx.stream().record(ctx.start_event());
      backend.enqueue(ctx, mode, bytes, options.iterations);
      if (times) ctx.stream().record(ctx.stop_event());
      return std::string();
    });
    // Opened whatever happened above: a rank whose stream waits on the gate must drain even if another rank failed.
    std::exception_ptr open_error;
    if (active) {
      try {
        ctx.open_gate(gate);  // rank 0's gate, or each rank's own on two hosts
      } catch (...) {
        open_error = std::current_exception();
      }
    }
    auto complete = lockstep.phase("complete", [&] {
      if (open_error) std::rethrow_exception(open_error);
      if (!active) return std::string();
      ctx.stream().synchronize();
      if (!times) return std::string();
      return exact_payload(ctx.stop_event().elapsed_ms(ctx.start_event()));
    });
    if (!complete.ok) break;
    // The slowest rank's time: the data has arrived only when the last rank involved is done.
    double per_iteration_us = largest_payload(complete) * 1e3 / options.iterations;
    result.time_us.push_back(mode == Mode::Lat ? per_iteration_us / 2 : per_iteration_us);
  }

  // Payload: "<wrong bytes>;<mappings opened while timing>;<completion lane writes while timing>", any part empty
  // when it does not apply.
  auto checked = lockstep.phase("check", [&] {
    std::string payload;
    if (receiver && options.check) {
      const int from = ctx.peer();
      payload = cat(ctx.count_wrong_received(bytes, from, window_shift(name, mode, bytes, options.repeats - 1, from)));
    }
    payload += ";";
    auto opens_after = active ? backend.mapping_opens() : std::nullopt;
    if (opens_before && opens_after) payload += cat(*opens_after - *opens_before);
    payload += ";";
    auto lane_writes_after = active ? backend.completion_lane_writes() : std::nullopt;
    if (lane_writes_before && lane_writes_after) payload += cat(*lane_writes_after - *lane_writes_before);
    return payload;
  });
  if (!checked.ok) {
    result.error = cat(describe({.op = cat("backend ", name, ", ", mode_name(mode)), .bytes = bytes}), ": ",
                       lockstep.error());
    result.time_us.clear();
    return result;
  }
  std::uint64_t wrong = 0;
  for (const auto& payload : checked.payloads) {
    if (payload.find(';') == std::string::npos) continue;  // a rank that takes no part
    std::vector<std::string> fields;
    std::istringstream in(payload);
    for (std::string field; std::getline(in, field, ';');) fields.push_back(field);
    // Field i summed over the ranks that filled it (an empty field does not apply to that rank).
    const auto add = [&](std::size_t i, std::optional<std::uint64_t>& sum) {
      if (i < fields.size() && !fields[i].empty()) sum = sum.value_or(0) + std::stoull(fields[i]);
    };
    if (!fields[0].empty()) wrong += std::stoull(fields[0]);  // a ';' in the payload makes at least one field
    add(1, result.mapping_opens);
    add(2, result.completion_lane_writes);
  }
  if (options.check) result.wrong = wrong;
  return result;
}

}  // namespace pickle::bench
