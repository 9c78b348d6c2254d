#include "coll_rank.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "coll_backend.hpp"
#include "coll_context.hpp"
#include "coll_report.hpp"
#include "coll_session.hpp"
#include "coll_step.hpp"
#include "core/format.hpp"
#include "cuda_device.hpp"
#include "environment.hpp"
#include "lockstep.hpp"
#include "progress.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "table_text.hpp"

namespace pickle::bench {
namespace {

/// Every collective x datatype x operator x size of the run, in table order. Sizes too small to give each rank an
/// element are left out (and counted in a note); sizes that round to the same shape appear once.
std::vector<CollPoint> plan_points(const CollOptions& options, const std::vector<std::size_t>& sizes, int nranks,
                                   std::vector<std::string>& notes) {
  std::vector<CollPoint> points;
  for (Collective coll : options.collectives) {
    const std::vector<ReduceOp> ops = is_reduction(coll) ? options.ops : std::vector<ReduceOp>{ReduceOp::Sum};
    for (DataType type : options.dtypes) {
      for (ReduceOp op : ops) {
        std::size_t too_small = 0, previous = 0;
        for (std::size_t bytes : sizes) {
          CollShape shape = coll_shape(coll, bytes, datatype_size(type), nranks);
          if (shape.count == 0) {
            ++too_small;
            continue;
          }
          if (shape.bytes == previous) continue;
          previous = shape.bytes;
          points.push_back({.coll = coll, .type = type, .op = op, .root = options.root, .shape = shape});
        }
        if (too_small > 0) {
          // allreduce and broadcast need one element in all; the others one per rank (coll_shape).
          const bool whole = coll == Collective::AllReduce || coll == Collective::Broadcast;
          const std::size_t least = datatype_size(type) * (whole ? 1 : static_cast<std::size_t>(nranks));
          notes.push_back(cat(collective_name(coll), " ", datatype_name(type), ": ", too_small, " size(s) below ",
                              whole ? "one element" : "one element per rank", " (", least, " bytes) skipped"));
        }
      }
    }
  }
  return points;
}

/// The figures of one point for its progress line (" [busbw 225.7 GB/s out of place, #wrong 0; ...]"), so that a
/// sweep stopped before its table keeps what it measured in its log.
std::string point_figures(const std::vector<CollResult>& results, int nranks) {
  std::string text;
  for (const auto& r : results) {
    if (!r.measured()) continue;
    text += cat(text.empty() ? " [busbw " : "; ", fixed(coll_median_busbw_gbps(r, nranks), 1), " GB/s ",
                r.in_place ? "in place" : "out of place",
                ", #wrong ", r.wrong ? std::to_string(*r.wrong) : std::string("N/A"));
  }
  return text.empty() ? text : text + "]";
}

int run(const CollOptions& options, const std::vector<std::string>& args, const RankInfo& self) {
  Store store(self);
  Lockstep lockstep(store);
  const MemoryKind kind = agree_on_memory(lockstep, self, options.memory, options.json_path);
  require_agreed(
      lockstep.phase("options",
                     [&] {
                       if (options.root >= self.world_size) {
                         throw InvalidArgument(cat("-r ", options.root,
                                                   ": the root must be a rank below the world size ", self.world_size));
                       }
                       return std::string();
                     }),
      "checking the options");

  CollReport report;
  report.options = options;
  report.command = {"pickle", "bench", "coll"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.memory = kind;
  report.world_size = self.world_size;
  report.started_utc = utc_now();

  std::string shared_gpu;
  std::unique_ptr<CollContext> ctx = make_context(lockstep, store, kind, shared_gpu);
  record_shared_gpu(report, std::move(shared_gpu));

  std::size_t max_bytes =
      sweep_max_bytes(options, kind == MemoryKind::Cuda ? kCollCudaDefaultMaxBytes : kCollHostDefaultMaxBytes);
  std::vector<CollPoint> points =
      plan_points(options, size_sweep(options.min_bytes, max_bytes, options.factor), self.world_size, report.notes);

  // Two buffers per rank (send, receive) of the largest shape, halved while they do not fit.
  if (!points.empty()) {
    std::size_t smallest = points.front().shape.bytes, largest = 0;
    for (const auto& p : points) {
      smallest = std::min(smallest, p.shape.bytes);
      largest = std::max(largest, p.shape.bytes);
    }
    // Inside the phase: a size that cannot fit is refused by every rank together, and said once.
    auto allocated = lockstep.phase("allocate", [&] {
      const std::size_t wanted = first_buffer_bytes(kind, smallest, largest, 2, self.local_world_size);
      return cat(ctx->allocate(wanted, smallest, 2));
    });
    require_agreed(allocated, "allocating buffers");
    std::size_t capacity = largest;
    for (const auto& payload : allocated.payloads)
      capacity = std::min<std::size_t>(capacity, std::strtoull(payload.c_str(), nullptr, 10));
    std::size_t planned = points.size();
    points.erase(
        std::remove_if(points.begin(), points.end(), [&](const CollPoint& p) { return p.shape.bytes > capacity; }),
        points.end());
    if (points.size() < planned) {
      report.notes.push_back(cat("sizes above ", short_size(capacity),
                                 " skipped: two buffers of the next size do not fit ",
                                 kind == MemoryKind::Cuda ? "in free GPU memory" : "in a quarter of MemAvailable"));
    }
  }
  // Why each size went is in the notes above (too small for the collective, or too large for memory).
  if (points.empty()) report.notes.push_back("nothing to measure: every size was skipped");
  report.points = points;

  double total_work = 0;
  for (const auto& p : points) total_work += static_cast<double>(p.shape.bytes) + (1 << 20);
  total_work *= static_cast<double>(options.backends.size());
  Progress progress(total_work, static_cast<int>(points.size() * options.backends.size()), stderr, self.rank == 0,
                    "bench coll");
  // Every point of one backend; its first error ends the backend's run.
  auto measure = [&](CollBackend& backend, std::size_t index) {
    for (const auto& point : points) {
      std::vector<CollResult> results;
      try {
        results = run_coll_point(*ctx, backend, static_cast<int>(index), lockstep, options, point);
      } catch (const LockstepBroken& e) {
        // The point that was cut off is reported failed, both placements, in the report rank 0 still writes.
        for (bool in_place : {false, true}) {
          CollResult cut{};
          cut.backend = options.backends[index];
          cut.point = point;
          cut.in_place = in_place;
          cut.iterations = options.iterations;
          cut.error = e.message();
          report.results.push_back(std::move(cut));
        }
        throw;
      }
      progress.step(static_cast<double>(point.shape.bytes) + (1 << 20),
                    cat(options.backends[index], " ", collective_name(point.coll), " ", short_size(point.shape.bytes),
                        point_figures(results, self.world_size)));
      std::string error;
      for (const auto& r : results) {
        if (!r.error.empty() && error.empty()) error = r.error;
      }
      report.results.insert(report.results.end(), results.begin(), results.end());
      if (!error.empty()) return error;
    }
    return std::string();
  };
  const auto write_report = [&] {
    print_coll_table(report, stdout);
    if (!options.json_path.empty()) write_result_file(coll_to_json(report), options.json_path);
    WrongData wrong;
    for (const auto& r : report.results) {
      wrong.add(r.wrong.value_or(0), cat(r.backend, " ", collective_name(r.point.coll), " ",
                                         datatype_name(r.point.type), " ", r.point.shape.bytes, " B",
                                         r.in_place ? " in place" : ""));
    }
    say_wrong_data("coll", wrong, "elements", stdout);
  };
  run_backends(ctx, lockstep, "coll", options.backends, measure, report.backends, write_report);
  return report.exit_code();
}

}  // namespace

int run_coll_rank(const CollOptions& options, const std::vector<std::string>& args) {
  return run_coll_session("coll", [&](const RankInfo& self) { return run(options, args, self); });
}

}  // namespace pickle::bench
