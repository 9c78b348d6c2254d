#include "coll_step.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"

namespace pickle::bench {
namespace {

/// Where the call's send and receive parts lie for one placement.
struct Placement {
  std::byte* send = nullptr;
  std::byte* recv = nullptr;
  std::byte* buffer = nullptr;  ///< the buffer that is poisoned before the check (the receive buffer)
};

Placement place(CollContext& ctx, CollBackend& backend, const CollPoint& point, bool in_place) {
  const std::size_t size = datatype_size(point.type);
  if (!in_place) {
    return {.send = backend.buffer(ctx, 0), .recv = backend.buffer(ctx, 1), .buffer = backend.buffer(ctx, 1)};
  }
  InPlaceLayout layout = backend.in_place_layout(point.coll, ctx.rank(), point.shape.count);
  std::byte* base = backend.buffer(ctx, 1);
  return {.send = base + layout.send_offset * size, .recv = base + layout.recv_offset * size, .buffer = base};
}

CollPattern pattern_of(const CollContext& ctx, const CollPoint& point, std::uint64_t salt) {
  CollPattern p;
  p.coll = point.coll;
  p.type = point.type;
  p.op = point.op;
  p.root = point.root;
  p.nranks = ctx.world_size();
  p.shape = point.shape;
  p.salt = salt;
  p.corrupt = ctx.corrupt();
  return p;
}

/// One placement: load, warm-up, repeats, check.
CollResult run_placement(CollContext& ctx, CollBackend& backend, int backend_index, Lockstep& lockstep,
                         const CollOptions& options, const CollPoint& point, bool in_place) {
  CollResult result;
  result.backend = std::string(backend.name());
  result.point = point;
  result.in_place = in_place;
  result.iterations = options.iterations;
  if (in_place) {
    result.unsupported = backend.in_place_unsupported(point.coll);
    if (!result.unsupported.empty()) return result;  // the same answer on every rank: no phase to agree on
  }
  const std::size_t size = datatype_size(point.type);
  const auto& shape = point.shape;
  Placement where = place(ctx, backend, point, in_place);
  CollCall call{.coll = point.coll,
                .send = where.send,
                .recv = where.recv,
                .count = shape.count,
                .type = point.type,
                .op = point.op,
                .root = point.root};
  auto salt = [&](std::uint64_t purpose) {
    return step_salt(static_cast<std::uint64_t>(backend_index) * 4 + (in_place ? 2 : 0) + purpose,
                     static_cast<std::uint64_t>(point.coll) * 64 + static_cast<std::uint64_t>(point.type) * 8 +
                         static_cast<std::uint64_t>(point.op),
                     static_cast<std::uint64_t>(point.root), shape.bytes);
  };

  lockstep.begin_step();
  // Timed calls run on real values too: uninitialised memory may hold NaNs or subnormals, which some reductions
  // (host memory's among them) process more slowly.
  lockstep.phase("load", [&] {
    ctx.load_inputs(pattern_of(ctx, point, salt(0)), where.send, 0, shape.send_elems);
    return std::string();
  });
  lockstep.phase("warm-up", [&] {
    for (int i = 0; i < options.warmup; ++i) backend.enqueue(ctx, call);
    ctx.stream().synchronize();
    return std::string();
  });
  // Out of place, every timed call computes the same result from the same inputs, so the last repeat's output is
  // checked too: a fault that only shows when calls run back to back (a buffer or control slot reused while a
  // peer still needs it) lands there. In place, each call consumes the previous one's output; only the separate
  // call below is checked.
  const bool check_timed = options.check && !in_place;
  std::uint64_t wrong = 0;
  auto add_wrong = [&](const PhaseOutcome& outcome) {
    for (const auto& payload : outcome.payloads) wrong += std::strtoull(payload.c_str(), nullptr, 10);
  };
  const std::optional<std::uint64_t> local_before = backend.local_copy_bytes();
  for (int repeat = 0; repeat < options.repeats && !lockstep.failed(); ++repeat) {
    if (check_timed && repeat + 1 == options.repeats) {
      // Every rank's poison is done before any rank's timed calls start (the phase is a barrier).
      lockstep.phase("poison", [&] {
        ctx.poison(where.recv, shape.recv_elems * size);
        ctx.stream().synchronize();
        return std::string();
      });
    }
    auto timed = lockstep.phase(
        "time", [&] { return exact_payload(time_calls(ctx, options.iterations, [&] { backend.enqueue(ctx, call); })); });
    if (!timed.ok) break;
    result.time_us.push_back(largest_payload(timed) * 1e3 / options.iterations);
  }
  if (local_before && !lockstep.failed() && !result.time_us.empty()) {
    const std::uint64_t calls = result.time_us.size() * static_cast<std::uint64_t>(options.iterations);
    const auto copied =
        summed(lockstep, "local copies", [&] { return *backend.local_copy_bytes() - *local_before; });
    if (copied) result.local_copy_bytes_per_call = static_cast<double>(*copied) / static_cast<double>(calls);
  }
  if (check_timed && !lockstep.failed()) {
    auto checked = lockstep.phase("check timed", [&] {
      return cat(ctx.count_wrong(pattern_of(ctx, point, salt(0)), where.recv, shape.recv_elems));
    });
    if (checked.ok) add_wrong(checked);
  }
  if (options.check) {
    // A separate call with inputs of their own: a result left over from the timed calls cannot pass.
    auto checked = lockstep.phase("check", [&] {
      CollPattern pattern = pattern_of(ctx, point, salt(1));
      ctx.poison(where.buffer, std::max(shape.send_elems, shape.recv_elems) * size);
      ctx.load_inputs(pattern, where.send, 0, shape.send_elems);
      backend.enqueue(ctx, call);
      ctx.stream().synchronize();
      return cat(ctx.count_wrong(pattern, where.recv, shape.recv_elems));
    });
    if (checked.ok) {
      add_wrong(checked);
      result.wrong = wrong;
    }
  }
  if (lockstep.failed()) {
    result.error = cat(describe({.op = cat("backend ", result.backend, ", ", collective_name(point.coll), " ",
                                           datatype_name(point.type), in_place ? " in-place" : " out-of-place"),
                                 .bytes = shape.bytes}),
                       ": ", lockstep.error());
    result.time_us.clear();
    result.wrong.reset();
    result.local_copy_bytes_per_call.reset();
  }
  return result;
}

}  // namespace

double time_calls(CollContext& ctx, int iterations, const std::function<void()>& enqueue) {
  if (ctx.kind() == MemoryKind::Host) {
    Stopwatch watch;
    for (int i = 0; i < iterations; ++i) enqueue();
    ctx.stream().synchronize();
    return watch.seconds() * 1e3;
  }
  ctx.stream().record(ctx.start_event());
  for (int i = 0; i < iterations; ++i) enqueue();
  ctx.stream().record(ctx.stop_event());
  ctx.stream().synchronize();
  return static_cast<double>(ctx.stop_event().elapsed_ms(ctx.start_event()));
}

std::vector<CollResult> run_coll_point(CollContext& ctx, CollBackend& backend, int backend_index, Lockstep& lockstep,
                                       const CollOptions& options, const CollPoint& point) {
  std::vector<CollResult> results;
  results.push_back(run_placement(ctx, backend, backend_index, lockstep, options, point, /*in_place=*/false));
  if (!results.back().error.empty()) return results;  // the backend is broken: its caller stops it
  results.push_back(run_placement(ctx, backend, backend_index, lockstep, options, point, /*in_place=*/true));
  return results;
}

}  // namespace pickle::bench
