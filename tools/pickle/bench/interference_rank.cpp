// One rank of `pickle bench interference`: the seed's method, with proof that the background overlapped.
//
// Who takes part and who measures depends on the background (interference_plan.hpp): p2p, rank 0 sends to rank 1
// and rank 1 measures; allgather, ranks 0 .. N-1 gather and every one of them measures. Per background x backend x
// foreground x size, every rank goes through the same phases (Lockstep), so that a failure on any rank ends the row
// on every rank with one error that names the rank (interference_measure.cpp):
//   alone   measuring ranks: -w warm-up, then -n timed iterations of the foreground (CUDA events) -> t_alone
//   start   measuring ranks poison their receive buffer; the ranks taking part start their TrafficRunner (a ring of
//           messages in flight)
//   steady  measuring ranks wait until their background is in steady state (interference_window.hpp)
//   with    measuring ranks: the same measurement with the background running -> t_with, and the host clock around it
//   halt    the ranks taking part stop posting and exchange how many messages they posted
//   drain   they post up to the largest count and wait for everything; each measuring rank computes the statistics
//           of its own window from its own completions
//   after   measuring ranks: the measurement alone again; t_alone is the mean of the two (they bracket t_with in time)
//   check   measuring ranks count wrong bytes in what they received (an allgather's every section), and hand their
//           figures to every rank through the store; rank 0 combines them into the row (interference_row.hpp)
#include "interference_rank.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/json.hpp"
#include "cuda_device.hpp"
#include "device/backends.hpp"
#include "interference_data_check.hpp"
#include "interference_kernels.hpp"
#include "interference_measure.hpp"
#include "interference_rank_state.hpp"
#include "interference_report.hpp"
#include "memcpy_pair.hpp"
#include "progress.hpp"
#include "result_file.hpp"
#include "sizes.hpp"

namespace pickle::bench {
namespace {

/// GPU memory left to NCCL's and pickle's own buffers when sizing the background's.
constexpr std::size_t kReserveBytes = std::size_t{2} << 30;

/// Measuring ranks: sets up every foreground; the payload is their descriptions as a JSON array.
std::string set_up_foregrounds(RankState& s) {
  std::string why_not;
  s.telemetry = GpuTelemetry::open(device::cuda_pci_bus_id(s.device), why_not);
  s.telemetry_source = s.telemetry ? s.telemetry->describe() : cat("not sampled: ", why_not);
  json::Value infos = json::Value::array();
  for (const auto& name : s.options->foregrounds) {
    auto foreground = make_foreground(name, s.options->attention);
    ForegroundInfo info = set_up_foreground(*foreground, s.stream->get(), s.deadline());
    if (info.status != RunStatus::Ok) foreground.reset();
    info.name = name;
    infos.push_back(foreground_to_json(info));
    s.foregrounds.push_back(std::move(foreground));
  }
  return infos.dump();
}

/// Ranks taking part: the background buffers for the largest size that fits, halving down the sweep. Ranks that
/// share a GPU (--share-gpus) each count on their share of its free memory. Returns the capacity (0 when not even the
/// smallest size fits).
std::size_t allocate_background(RankState& s, const std::vector<std::size_t>& sizes, int ranks_per_gpu) {
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    const std::size_t capacity = *it;
    const std::size_t send = s.plan.send_need(s.rank, capacity), recv = s.plan.recv_need(s.rank, capacity);
    const std::size_t free = cuda::free_memory(describe({.rank = s.rank, .op = "bench interference sizing"})) /
                             static_cast<std::size_t>(ranks_per_gpu);
    if (send + recv + kReserveBytes > free) continue;
    try {
      s.send = send > 0 ? device::allocate(MemoryKind::Cuda, send, s.device) : nullptr;
      s.recv = recv > 0 ? device::allocate(MemoryKind::Cuda, recv, s.device) : nullptr;
      s.send_bytes = send;
      s.recv_bytes = recv;
      return capacity;
    } catch (const CudaError&) {
      s.send.reset();
      s.recv.reset();
    }
  }
  return 0;
}

/// The smallest capacity that the ranks taking part reported (their payloads; the others' are empty).
std::size_t agreed_capacity(const PhaseOutcome& allocated) {
  std::size_t capacity = std::numeric_limits<std::size_t>::max();
  for (const auto& payload : allocated.payloads) {
    if (!payload.empty()) capacity = std::min<std::size_t>(capacity, std::strtoull(payload.c_str(), nullptr, 10));
  }
  return capacity == std::numeric_limits<std::size_t>::max() ? 0 : capacity;
}

/// Fills the send buffer with this rank's pattern (after checking the pattern kernels on both buffers).
void fill_background(RankState& s) {
  const std::string what = describe({.rank = s.rank, .op = "filling the background's data"});
  if (s.send) {
    self_check_pattern(s, s.send->data(), s.send_bytes);
    cuda::check(kernels::fill_pattern(s.send->data(), s.send_bytes, s.rank, 0, s.stream->get()), "fill_pattern", what);
    cuda::wait_stream(s.stream->get(), s.deadline(), what);
  }
  if (s.recv) self_check_pattern(s, s.recv->data(), s.recv_bytes);
}

/// Rank 0's output: the table on stdout, and the --json file.
void write_report(const InterferenceReport& report) {
  print_interference_table(report, stdout);
  if (!report.options.json_path.empty()) write_result_file(interference_to_json(report), report.options.json_path);
}

int run_rank(Store& store, Lockstep& lockstep, const InterferenceOptions& options,
             const std::vector<std::string>& args) {
  const RankInfo self = store.self();
  RankState s;
  s.store = &store;
  s.lockstep = &lockstep;
  s.options = &options;
  try {
    s.plan = InterferencePlan(options, self.world_size);
  } catch (const InvalidArgument& e) {
    throw AgreedFailure(ErrorCode::InvalidArgument, plain_message(e));  // the same on every rank: rank 0 reports it
  }
  s.rank = self.rank;
  s.device = rank_device(self.local_rank);
  s.local_world_size = self.local_world_size;
  s.timeout_seconds = store.timeout_seconds();
  const int gpus = device::cuda_device_count();
  const int local_ranks = std::min(s.plan.ranks_taking_part(), self.local_world_size);

  PairPlanRequest request;
  request.suite = "interference";
  request.memory = "cuda";
  request.output_files.emplace_back(options.json_path, "--json");
  PairPlan plan = agree_on_pair_plan(lockstep, s.rank, request);

  InterferenceReport report;
  report.options = options;
  report.command = {"pickle", "bench", "interference"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = plan.started_utc;
  report.world_size = self.world_size;
  report.allgather_ranks = s.plan.allgather_ranks();
  record_shared_gpu(report, gpu_sharing_note(local_ranks, gpus));

  require_agreed(lockstep.phase("context", [&] {
                  if (!s.active()) return std::string();
                  bind_cuda_device(s.device);
                  s.stream.emplace(describe({.rank = s.rank, .op = "bench interference stream"}));
                  s.counter.emplace(sizeof(unsigned long long), "bench interference counter");
                  return std::string();
                }),
                "binding the GPUs");

  auto foregrounds = lockstep.phase("foregrounds", [&] {
    return s.plan.measures(s.rank) ? set_up_foregrounds(s) : std::string();
  });
  require_agreed(foregrounds, "setting up the foregrounds on the measuring ranks");
  try {
    report.foregrounds = combine_foregrounds(foregrounds.payloads);
  } catch (const Error& e) {
    throw AgreedFailure(e.code(), plain_message(e));  // every rank read the same payloads: rank 0 reports it
  }
  for (std::size_t f = 0; f < s.foregrounds.size() && f < report.foregrounds.size(); ++f) {
    // Not ok on some rank: no rank runs it, so that every rank keeps the same rows.
    if (report.foregrounds[f].status != RunStatus::Ok) s.foregrounds[f].reset();
  }

  const std::size_t max_bytes = sweep_max_bytes(options, kInterferenceDefaultMaxBytes);
  std::vector<std::size_t> sizes = size_sweep(options.min_bytes, max_bytes, options.factor);
  const int ranks_per_gpu = gpus > 0 ? (local_ranks + gpus - 1) / gpus : 1;
  auto allocated = lockstep.phase("allocate", [&] {
    return s.active() ? cat(allocate_background(s, sizes, ranks_per_gpu)) : std::string();
  });
  require_agreed(allocated, "allocating the background's buffers");
  const std::size_t capacity = agreed_capacity(allocated);
  const std::size_t planned = sizes.size();
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](std::size_t b) { return b > capacity; }), sizes.end());
  if (sizes.size() < planned) {
    report.notes.push_back(
        capacity == 0 ? cat("no background size fits in free GPU memory (keeping ", human_bytes(kReserveBytes),
                            " for NCCL and pickle)")
                      : cat("sizes above ", short_size(capacity), " skipped: their buffers do not fit in free GPU "
                            "memory next to the foregrounds (keeping ", human_bytes(kReserveBytes),
                            " for NCCL and pickle)"));
  }
  if (std::string note = s.plan.skipped_sizes_note(sizes); !note.empty()) report.notes.push_back(note);
  report.sizes = sizes;

  require_agreed(lockstep.phase("fill", [&] {
                  if (s.active()) fill_background(s);
                  return std::string();
                }),
                "filling the background's data");

  int ok_foregrounds = 0;
  for (const auto& fg : report.foregrounds) ok_foregrounds += fg.status == RunStatus::Ok ? 1 : 0;
  const int rows = ok_foregrounds * static_cast<int>(s.plan.rows_per_foreground(sizes));
  Progress progress(rows, rows, stderr, s.rank == 0, "bench interference");
  // A rank that stops or dies ends the run with the rows measured before, the one it cut off failed.
  lockstep.run_then_report(
      "interference",
      [&] {
        for (const auto& background : options.backgrounds) {
          for (const auto& backend : options.backends) run_traffic(s, report, background, backend, progress);
        }
        lockstep.begin_step();
        lockstep.phase("free", [&] {
          s.foregrounds.clear();
          s.send.reset();
          s.recv.reset();
          return std::string();
        });
      },
      [&] { write_report(report); });
  return report.exit_code();
}

}  // namespace

int run_interference_rank(const InterferenceOptions& options, const std::vector<std::string>& args) {
  return run_pair_rank("interference", [&](Store& store, Lockstep& lockstep) {
    return run_rank(store, lockstep, options, args);
  });
}

}  // namespace pickle::bench
