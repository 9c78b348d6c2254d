// One rank of `pickle bench interference`: the seed's method, with proof that the background overlapped.
//
// Per background x backend x foreground x size, every rank goes through the same phases (Lockstep), so that a
// failure anywhere ends the row everywhere with one error:
//   alone   rank 1: -w warm-up, then -n timed iterations of the foreground (CUDA events) -> t_alone
//   start   rank 1 poisons its receive buffer; ranks 0 and 1 start their TrafficRunner (a ring of messages in flight)
//   steady  rank 1 waits until the background is in steady state (interference_window.hpp)
//   with    rank 1: the same measurement with the background running -> t_with, and the host clock around it
//   halt    both stop posting and exchange how many messages they posted
//   drain   both post up to the larger count and wait for everything; rank 1 computes the window's statistics
//   after   rank 1: the measurement alone again; t_alone is the mean of the two (they bracket t_with in time)
//   check   rank 1 counts wrong bytes in what it received, and hands the row to rank 0 through the store
#include "interference_rank.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "core/format.hpp"
#include "core/json.hpp"
#include "cuda_device.hpp"
#include "device/memory.hpp"
#include "interference_cuda.hpp"
#include "interference_foreground.hpp"
#include "interference_kernels.hpp"
#include "interference_report.hpp"
#include "interference_runner.hpp"
#include "interference_traffic.hpp"
#include "interference_window.hpp"
#include "lockstep.hpp"
#include "memcpy_pair.hpp"
#include "pattern.hpp"
#include "progress.hpp"
#include "result_file.hpp"
#include "sizes.hpp"

namespace pickle::bench {
namespace {

/// The background must have moved data for this long before the timed window opens.
constexpr std::int64_t kMinFlowNs = 50'000'000;
/// GPU memory left to NCCL's and pickle's own buffers when sizing the background's.
constexpr std::size_t kReserveBytes = std::size_t{2} << 30;
/// Bytes of the pattern kernels' self-check: not a multiple of 8, so that the tail path runs too.
constexpr std::size_t kSelfCheckBytes = 65536 + 5;

/// What one rank holds for the whole run.
struct RankState {
  Store* store = nullptr;
  Lockstep* lockstep = nullptr;
  const InterferenceOptions* options = nullptr;
  int rank = 0;
  int device = 0;
  bool active = false;
  double timeout_seconds = 60;
  std::optional<cuda::StreamHandle> stream;   // ranks 0 and 1: foreground (rank 1) and checks
  std::optional<cuda::DeviceBuffer> counter;  // one unsigned long long for the counting kernels
  std::vector<std::unique_ptr<Foreground>> foregrounds;  // rank 1; null where set-up failed
  std::unique_ptr<device::Allocation> send, recv;
  std::size_t send_bytes = 0, recv_bytes = 0;

  Deadline deadline() const { return Deadline::after_seconds(timeout_seconds); }
  bool allgather() const {
    const auto& b = options->backgrounds;
    return std::find(b.begin(), b.end(), "allgather") != b.end();
  }
};

/// Background buffer bytes this rank needs for messages of up to `capacity` bytes: p2p sends from rank 0 into
/// rank 1; allgather gathers half of each message from each rank into both.
std::size_t send_need(const RankState& s, std::size_t capacity) {
  return s.rank == 0 ? capacity : (s.allgather() ? capacity / 2 : 0);
}
std::size_t recv_need(const RankState& s, std::size_t capacity) {
  return s.rank == 1 || s.allgather() ? capacity : 0;
}

/// Wrong bytes of `data[0, bytes)` against `rank`'s pattern from byte 0, counted on the GPU.
std::uint64_t count_wrong_on_gpu(RankState& s, const void* data, std::size_t bytes, int rank, const std::string& what) {
  cudaStream_t stream = s.stream->get();
  cuda::check(cudaMemsetAsync(s.counter->data(), 0, sizeof(unsigned long long), stream), "cudaMemsetAsync", what);
  cuda::check(kernels::count_pattern_wrong(data, bytes, rank, 0, s.counter->as<unsigned long long>(), stream),
              "count_pattern_wrong", what);
  unsigned long long wrong = 0;
  cuda::check(cudaMemcpyAsync(&wrong, s.counter->data(), sizeof wrong, cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync", what);
  cuda::wait_stream(stream, s.deadline(), what);
  return wrong;
}

/// The device pattern kernels must produce and check exactly the host's pattern (pattern.hpp): fill a region,
/// compare it on the host, count it on the GPU (0), flip one byte, count again (1).
void self_check_pattern(RankState& s, void* scratch, std::size_t scratch_bytes) {
  const std::string what = cat(describe({.rank = s.rank, .op = "bench interference pattern self-check"}));
  const std::size_t bytes = std::min(kSelfCheckBytes, scratch_bytes);
  if (bytes == 0) return;
  cudaStream_t stream = s.stream->get();
  cuda::check(kernels::fill_pattern(scratch, bytes, s.rank, 0, stream), "fill_pattern", what);
  std::vector<std::uint8_t> host(bytes);
  cuda::check(cudaMemcpyAsync(host.data(), scratch, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync", what);
  cuda::wait_stream(stream, s.deadline(), what);
  if (std::uint64_t wrong = count_wrong(host.data(), bytes, s.rank, 0); wrong != 0) {
    throw Error(ErrorCode::Internal, cat(what, ": the GPU's pattern differs from the host's in ", wrong, " bytes"));
  }
  if (std::uint64_t wrong = count_wrong_on_gpu(s, scratch, bytes, s.rank, what); wrong != 0) {
    throw Error(ErrorCode::Internal, cat(what, ": the GPU counts ", wrong, " wrong bytes in a correct pattern"));
  }
  const std::uint8_t flipped = static_cast<std::uint8_t>(~host[bytes - 1]);  // the tail byte: the last path to test
  cuda::check(cudaMemcpyAsync(static_cast<std::uint8_t*>(scratch) + bytes - 1, &flipped, 1, cudaMemcpyHostToDevice,
                              stream),
              "cudaMemcpyAsync", what);
  if (std::uint64_t wrong = count_wrong_on_gpu(s, scratch, bytes, s.rank, what); wrong != 1) {
    throw Error(ErrorCode::Internal, cat(what, ": the GPU counts ", wrong, " wrong bytes where one was flipped"));
  }
}

/// Rank 1: sets up every foreground; the payload is their descriptions as a JSON array.
std::string set_up_foregrounds(RankState& s) {
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

/// Active ranks: the background buffers for the largest size that fits, halving down the sweep. Returns the
/// capacity (0 when not even the smallest size fits).
std::size_t allocate_background(RankState& s, const std::vector<std::size_t>& sizes) {
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    const std::size_t capacity = *it;
    const std::size_t send = send_need(s, capacity), recv = recv_need(s, capacity);
    const std::size_t free = cuda::free_memory(describe({.rank = s.rank, .op = "bench interference sizing"}));
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

void* send_ptr(const RankState& s) { return s.send ? s.send->data() : nullptr; }
void* recv_ptr(const RankState& s) { return s.recv ? s.recv->data() : nullptr; }

/// Rank 1: one measurement of the foreground (ms per iteration) with the run's warm-up and iterations.
double time_alone(RankState& s, Foreground& foreground) {
  const auto& o = *s.options;
  return time_foreground(foreground, s.stream->get(), o.warmup, o.warmup_ms / 1e3, o.iterations, s.deadline())
      .ms_per_iteration;
}

/// One row: every rank calls it with the same arguments (see the file comment for the phases).
InterferenceRow run_row(RankState& s, Traffic& traffic, Foreground* foreground, const std::string& foreground_name,
                        std::size_t bytes) {
  Lockstep& lockstep = *s.lockstep;
  const auto& o = *s.options;
  InterferenceRow row;
  row.foreground = foreground_name;
  row.background = std::string(traffic.background());
  row.backend = std::string(traffic.backend());
  row.bytes = bytes;
  const bool measures = s.rank == 1;
  const bool allgather = row.background == "allgather";
  const std::string what =
      describe({.rank = s.rank, .peer = s.active ? 1 - s.rank : -1,
                .op = cat(row.backend, " ", row.background, " background under ", foreground_name), .bytes = bytes});

  std::optional<TrafficRunner> runner;  // aborted and joined on any way out of this function
  ForegroundTiming with;
  std::uint64_t foreground_changed = 0;

  lockstep.begin_step();
  lockstep.phase("alone", [&] {
    if (!measures) return std::string();
    row.alone_before_ms = time_alone(s, *foreground);
    if (o.check) foreground_changed += foreground->count_changed(s.stream->get(), s.deadline());
    return std::string();
  });
  lockstep.phase("start", [&] {
    if (!s.active) return std::string();
    if (measures) {
      cuda::check(cudaMemsetAsync(recv_ptr(s), kPoisonByte, bytes, s.stream->get()), "cudaMemsetAsync", what);
      cuda::wait_stream(s.stream->get(), s.deadline(), what);
    }
    runner.emplace(traffic, send_ptr(s), recv_ptr(s), bytes, o.depth, s.device, what, s.timeout_seconds);
    runner->start();
    return std::string();
  });
  lockstep.phase("steady", [&] {
    if (!s.active) return std::string();
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
    with = time_foreground(*foreground, s.stream->get(), o.warmup, o.warmup_ms / 1e3, o.iterations, s.deadline());
    row.with_ms = with.ms_per_iteration;
    runner->rethrow_failure();
    if (o.check) foreground_changed += foreground->count_changed(s.stream->get(), s.deadline());
    return std::string();
  });
  auto halted = lockstep.phase("halt", [&] {
    return s.active ? cat(runner->halt()) : std::string();
  });
  std::uint64_t target = 0;
  if (halted.ok) {
    target = drain_target(std::strtoull(halted.payloads[0].c_str(), nullptr, 10),
                          std::strtoull(halted.payloads[1].c_str(), nullptr, 10));
  }
  lockstep.phase("drain", [&] {
    if (!s.active) return std::string();
    runner->drain(target, s.deadline());
    if (measures) row.window = window_stats(runner->completions(), bytes, with.start_ns, with.end_ns);
    return std::string();
  });
  lockstep.phase("after", [&] {
    if (!measures) return std::string();
    row.alone_after_ms = time_alone(s, *foreground);
    if (o.check) foreground_changed += foreground->count_changed(s.stream->get(), s.deadline());
    return std::string();
  });
  auto checked = lockstep.phase("check", [&] {
    if (!measures) return std::string();
    if (o.check) {
      row.foreground_wrong = foreground_changed;
      if (allgather) {
        row.background_wrong = count_wrong_on_gpu(s, recv_ptr(s), bytes / 2, 0, what) +
                               count_wrong_on_gpu(s, static_cast<std::uint8_t*>(recv_ptr(s)) + bytes / 2, bytes / 2,
                                                  1, what);
      } else {
        row.background_wrong = count_wrong_on_gpu(s, recv_ptr(s), bytes, 0, what);
      }
    }
    return row_to_json(row).dump();
  });
  if (!checked.ok) {
    InterferenceRow failed;
    failed.foreground = row.foreground;
    failed.background = row.background;
    failed.backend = row.backend;
    failed.bytes = bytes;
    failed.error = cat(describe({.op = cat(row.backend, " ", row.background, " under ", foreground_name),
                                 .bytes = bytes}),
                       ": ", lockstep.error());
    return failed;
  }
  return row_from_json(json::parse(checked.payloads[1]));
}

/// One background x backend over every foreground and size; appends to the report.
void run_traffic(RankState& s, InterferenceReport& report, const std::string& background, const std::string& backend,
                 Progress& progress) {
  Lockstep& lockstep = *s.lockstep;
  TrafficRun run;
  run.background = background;
  run.backend = backend;
  std::unique_ptr<Traffic> traffic = make_traffic(background, backend);
  lockstep.begin_step();
  auto probed = lockstep.phase(cat("probe ", background, " ", backend), [&] {
    if (s.active) traffic->probe();
    return std::string();
  });
  if (!probed.ok) {
    // Absent hardware or libraries are facts about this machine, not failures of the backend.
    run.status = probed.code == ErrorCode::Unavailable ? RunStatus::Unavailable : RunStatus::Failed;
    run.detail = probed.error;
    report.traffic.push_back(run);
    return;
  }
  auto set_up = lockstep.phase(cat("setup ", background, " ", backend), [&] {
    if (s.active) traffic->setup(*s.store, s.rank, s.device);
    return traffic->detail();
  });
  if (!set_up.ok) {
    run.status = RunStatus::Failed;
    run.detail = cat("set-up: ", set_up.error);
    traffic->abandon();
  } else {
    run.detail = set_up.payloads[0];
    for (std::size_t f = 0; f < report.foregrounds.size() && run.status == RunStatus::Ok; ++f) {
      if (report.foregrounds[f].status != RunStatus::Ok) continue;
      Foreground* foreground = s.rank == 1 ? s.foregrounds[f].get() : nullptr;
      for (std::size_t bytes : report.sizes) {
        const std::string& name = report.foregrounds[f].name;
        if (background == "allgather" && bytes % 2 != 0) continue;  // noted once in the report
        InterferenceRow row = run_row(s, *traffic, foreground, name, bytes);
        progress.step(1, cat(backend, " ", background, " ", name, " ", short_size(bytes)));
        const bool failed = !row.error.empty();
        if (failed) {
          run.status = RunStatus::Failed;
          run.detail = row.error;
        }
        report.rows.push_back(std::move(row));
        if (failed) {
          traffic->abandon();
          break;
        }
      }
    }
  }
  report.traffic.push_back(run);
  // Tear the backend down on both ranks together (a communicator's goodbye needs its peer) before the next one.
  lockstep.begin_step();
  lockstep.phase(cat("teardown ", background, " ", backend), [&] {
    traffic.reset();
    return std::string();
  });
  traffic.reset();  // also when the phase was skipped
}

int run_rank(Store& store, Lockstep& lockstep, const InterferenceOptions& options,
             const std::vector<std::string>& args) {
  RankState s;
  s.store = &store;
  s.lockstep = &lockstep;
  s.options = &options;
  s.rank = store.self().rank;
  s.device = store.self().local_rank;
  s.active = s.rank < 2;
  s.timeout_seconds = store.timeout_seconds();

  PairPlanRequest request;
  request.suite = "interference";
  request.memory = "cuda";
  if (!options.json_path.empty()) request.output_files.push_back(options.json_path);
  PairPlan plan = agree_on_pair_plan(lockstep, s.rank, request);

  InterferenceReport report;
  report.options = options;
  report.command = {"pickle", "bench", "interference"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = plan.started_utc;
  report.world_size = store.self().world_size;

  require_phase(lockstep.phase("context", [&] {
                  if (!s.active) return std::string();
                  bind_cuda_device(s.device);
                  s.stream.emplace(describe({.rank = s.rank, .op = "bench interference stream"}));
                  s.counter.emplace(sizeof(unsigned long long), "bench interference counter");
                  return std::string();
                }),
                "binding the GPUs");

  auto foregrounds = lockstep.phase("foregrounds", [&] { return s.rank == 1 ? set_up_foregrounds(s) : std::string(); });
  require_phase(foregrounds, "setting up the foregrounds on rank 1");
  // Named: a range-for over a member of a temporary would dangle.
  const json::Value infos = json::parse(foregrounds.payloads[1]);
  for (const auto& info : infos.as_array()) report.foregrounds.push_back(foreground_from_json(info));

  const std::size_t max_bytes = sweep_max_bytes(options, kInterferenceDefaultMaxBytes);
  std::vector<std::size_t> sizes = size_sweep(options.min_bytes, max_bytes, options.factor);
  auto allocated = lockstep.phase("allocate", [&] {
    return s.active ? cat(allocate_background(s, sizes)) : std::string();
  });
  require_phase(allocated, "allocating the background's buffers");
  const std::size_t capacity = std::min(std::strtoull(allocated.payloads[0].c_str(), nullptr, 10),
                                        std::strtoull(allocated.payloads[1].c_str(), nullptr, 10));
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
  if (s.allgather() && std::any_of(sizes.begin(), sizes.end(), [](std::size_t b) { return b % 2 != 0; })) {
    report.notes.push_back("allgather skips odd sizes: each of the 2 ranks contributes half of the message");
  }
  report.sizes = sizes;

  require_phase(lockstep.phase("fill", [&] {
                  if (!s.active) return std::string();
                  if (s.send) {
                    self_check_pattern(s, s.send->data(), s.send_bytes);
                    cuda::check(kernels::fill_pattern(s.send->data(), s.send_bytes, s.rank, 0, s.stream->get()),
                                "fill_pattern", describe({.rank = s.rank, .op = "filling the background's data"}));
                    cuda::wait_stream(s.stream->get(), s.deadline(), "filling the background's data");
                  }
                  if (s.recv) self_check_pattern(s, s.recv->data(), s.recv_bytes);
                  return std::string();
                }),
                "filling the background's data");

  int rows = 0;
  for (const auto& fg : report.foregrounds) rows += fg.status == RunStatus::Ok ? 1 : 0;
  rows *= static_cast<int>(sizes.size() * options.backends.size() * options.backgrounds.size());
  Progress progress(rows, rows, stderr, s.rank == 0, "bench interference");
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

  if (s.rank == 0) {
    print_interference_table(report, stdout);
    if (!options.json_path.empty()) {
      write_result_file(interference_to_json(report), options.json_path, "interference");
    }
  }
  return report.exit_code();
}

}  // namespace

int run_interference_rank(const InterferenceOptions& options, const std::vector<std::string>& args) {
  return run_pair_rank("interference", [&](Store& store, Lockstep& lockstep) {
    return run_rank(store, lockstep, options, args);
  });
}

}  // namespace pickle::bench
