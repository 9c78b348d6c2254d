#include "p2p_rank.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "backend.hpp"
#include "comm/host_identity.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "cuda_device.hpp"
#include "device/backends.hpp"
#include "environment.hpp"
#include "lockstep.hpp"
#include "p2p_context.hpp"
#include "p2p_report.hpp"
#include "p2p_step.hpp"
#include "progress.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {
namespace {

int run(const P2pOptions& options, const std::vector<std::string>& args, const RankInfo& self);
/// Rank 0's output: the table on stdout, and the --json file.
void write_report(const P2pReport& report, const P2pOptions& options);

/// What rank 0 decides for everyone at the start.
struct Plan {
  MemoryKind kind = MemoryKind::Host;
  std::string nonce;  // names this job's fd sockets, so that concurrent runs on one host never meet
  /// Ranks 0 and 1 share a host (kernel and network namespace): each maps the other's buffers (the ce backend, the
  /// shared gate). On two hosts only the library backends run (pickle over its net transport, NCCL), and each rank
  /// opens its own gate after the same store round.
  bool same_host = true;
  std::string host0, host1;
};

Plan agree_on_plan(Lockstep& lockstep, const RankInfo& self, const P2pOptions& options) {
  auto outcome = lockstep.phase("plan", [&] {
    // The host as pickle's communicator tells hosts apart: hostname, boot id, network namespace.
    std::string payload = comm::host_identity();
    if (self.rank == 0) require_writable(options.json_path);
    if (self.rank == 0) {
      // GPUs by default when the pair can have two: two on this host, or one on each of two hosts.
      const int gpus = device::cuda_device_count();
      const bool enough = gpus >= 2 || (gpus == 1 && self.local_world_size == 1);
      bool cuda = options.memory == "cuda" || (options.memory.empty() && enough);
      payload += cat("\n", cuda ? "cuda" : "host", "\n", std::random_device{}(), "-", getpid());
    }
    return payload;
  });
  require_agreed(outcome, "agreeing on the plan");
  const std::string& zero = outcome.payloads[0];
  std::size_t first = zero.find('\n'), second = zero.find('\n', first + 1);
  Plan plan;
  plan.host0 = zero.substr(0, first);
  plan.host1 = outcome.payloads[1].substr(0, outcome.payloads[1].find('\n'));
  plan.same_host = plan.host0 == plan.host1;
  plan.kind = zero.substr(first + 1, second - first - 1) == "cuda" ? MemoryKind::Cuda : MemoryKind::Host;
  plan.nonce = zero.substr(second + 1);
  return plan;
}

/// Runs one backend over every mode and size; appends its steps to the report.
void run_backend(P2pContext& ctx, Lockstep& lockstep, P2pReport& report, const std::string& name,
                 Progress& progress) {
  BackendRun run;
  run.name = name;
  std::unique_ptr<P2pBackend> backend = make_backend(name);
  lockstep.begin_step();
  auto probed = lockstep.phase(cat("probe ", name), [&] {
    if (ctx.active()) backend->probe(ctx);
    return std::string();
  });
  if (!probed.ok) {
    // Absent hardware or libraries are facts about this machine, not failures of the backend.
    run.status = probed.code == ErrorCode::Unavailable ? BackendRun::Status::Unavailable : BackendRun::Status::Failed;
    run.detail = probed.error;
    report.backends.push_back(run);
    return;
  }
  auto set_up = lockstep.phase(cat("setup ", name), [&] {
    if (ctx.active()) backend->setup(ctx);
    return backend->detail();
  });
  if (!set_up.ok) {
    run.status = BackendRun::Status::Failed;
    run.detail = cat("set-up: ", set_up.error);
    backend->abandon();
  } else {
    run.detail = set_up.payloads[0];
    for (Mode mode : report.options.modes) {
      for (std::size_t bytes : report.sizes) {
        StepResult step;
        try {
          step = run_step(ctx, *backend, lockstep, report.options, mode, bytes);
        } catch (const LockstepBroken& e) {
          // No later phase can run: the step and its backend are recorded as failed for the report rank 0 still
          // writes (run()), and the run ends.
          step = StepResult{};
          step.backend = name;
          step.mode = mode;
          step.bytes = bytes;
          step.iterations = report.options.iterations;
          step.error = e.message();
          report.steps.push_back(std::move(step));
          run.status = BackendRun::Status::Failed;
          run.detail = e.message();
          report.backends.push_back(run);
          // Not torn down: its stream may still hold work against the peer that is gone (end_broken_run).
          (void)backend.release();
          throw;
        }
        progress.step(static_cast<double>(bytes) + (1 << 20), cat(name, " ", mode_name(mode), " ", short_size(bytes)));
        bool failed = !step.error.empty();
        if (failed) {
          run.status = BackendRun::Status::Failed;
          run.detail = step.error;
        }
        report.steps.push_back(std::move(step));
        if (failed) break;
      }
      if (run.status == BackendRun::Status::Failed) break;
    }
    if (run.status == BackendRun::Status::Failed) backend->abandon();
  }
  report.backends.push_back(run);
  // Drain this rank's work and tear the backend down before any rank starts the next one.
  lockstep.begin_step();
  lockstep.phase(cat("teardown ", name), [&] {
    if (ctx.active()) ctx.stream().synchronize();
    backend.reset();
    return std::string();
  });
  backend.reset();  // also when the phase was skipped
}

}  // namespace

int run_p2p_rank(const P2pOptions& options, const std::vector<std::string>& args) {
  RankInfo self = discover_rank_info();
  log::set_rank(self.rank);
  if (self.world_size < 2) {
    throw InvalidArgument(cat("bench p2p needs at least 2 ranks; this job has ", self.world_size));
  }
  // Rank 0 carries the verdict of outcomes that every rank agreed on: the others exit 0 then, because a launcher
  // stops the whole job at the first failing rank, which could cut rank 0 short while it writes the report.
  try {
    int code = run(options, args, self);
    return self.rank == 0 ? code : 0;
  } catch (const AgreedFailure& e) {
    if (self.rank != 0) return 0;
    std::fprintf(stderr, "pickle bench p2p: %s\n", e.message().c_str());
    return 1;
  }
}

namespace {

int run(const P2pOptions& options, const std::vector<std::string>& args, const RankInfo& self) {
  Store store(self);
  Lockstep lockstep(store);
  Plan plan = agree_on_plan(lockstep, self, options);

  P2pReport report;
  report.options = options;
  report.command = {"pickle", "bench", "p2p"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.memory = plan.kind;
  report.world_size = self.world_size;
  report.started_utc = utc_now();

  const bool active = self.rank < 2;
  const int device = plan.kind == MemoryKind::Cuda ? rank_device(self.local_rank) : 0;
  std::optional<P2pContext> ctx;
  auto context = lockstep.phase("context", [&] {
    if (active && plan.kind == MemoryKind::Cuda) bind_cuda_device(device);
    ctx.emplace(store, plan.kind, device);
    return active && plan.kind == MemoryKind::Cuda ? gpu_identity(device) : std::string();
  });
  require_agreed(context, "creating streams and events");
  record_shared_gpu(report, shared_gpu_note(context.payloads));

  // Sizes, then buffers for the largest, halved while they do not fit.
  std::size_t max_bytes =
      sweep_max_bytes(options, plan.kind == MemoryKind::Cuda ? kCudaDefaultMaxBytes : kHostDefaultMaxBytes);
  std::vector<std::size_t> sizes = size_sweep(options.min_bytes, max_bytes, options.factor);
  // Two ranks, three buffers each. Sized inside the phase: a size that cannot fit is refused by every rank together,
  // and said once.
  auto allocated = lockstep.phase("allocate", [&] {
    if (!active) return std::string();
    return cat(ctx->allocate(sweep_buffer_bytes(plan.kind, sizes), sizes.front()));
  });
  require_agreed(allocated, "allocating buffers");
  std::size_t capacity = std::min(std::strtoull(allocated.payloads[0].c_str(), nullptr, 10),
                                  std::strtoull(allocated.payloads[1].c_str(), nullptr, 10));
  std::size_t planned = sizes.size();
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](std::size_t s) { return s > capacity; }), sizes.end());
  if (sizes.size() < planned) {
    // The capacity is rarely a round size: said in GiB (short_size would give it in bytes).
    report.notes.push_back(cat("sizes above ", human_bytes(capacity), " skipped: ",
                               plan.kind == MemoryKind::Cuda ? "three buffers of the next size do not fit in free GPU "
                                                               "memory"
                                                             : "each of the three buffers may take a tenth of "
                                                               "MemAvailable"));
  }
  report.sizes = sizes;
  if (!plan.same_host) {
    report.notes.push_back(cat("ranks 0 and 1 are on different hosts (", plan.host0, "; ", plan.host1,
                               "): the ce backend cannot reach the peer's memory, and each rank opens its own gate "
                               "after the same store round"));
  }

  if (self.rank == 0 && capacity >= (std::size_t{1} << 30)) {
    std::fprintf(stderr, "bench p2p: filling %s pattern buffers\n", human_bytes(capacity).c_str());
  }
  require_agreed(lockstep.phase("exchange", [&] {
            if (active && plan.same_host) ctx->exchange(plan.nonce, capacity);
            return std::string();
          }),
          "mapping the peer's buffers");
  require_agreed(lockstep.phase("fill", [&] {
            if (active) ctx->fill_source();
            return std::string();
          }),
          "filling the pattern buffers");

  double total_work = 0;
  for (std::size_t bytes : sizes) total_work += static_cast<double>(bytes) + (1 << 20);
  total_work *= static_cast<double>(options.modes.size() * options.backends.size());
  const int total_steps = static_cast<int>(sizes.size() * options.modes.size() * options.backends.size());
  Progress progress(total_work, total_steps, stderr, self.rank == 0);
  // A rank that stops or dies ends the run with the steps measured before, the one it cut off failed.
  lockstep.run_then_report(
      "p2p",
      [&] {
        for (const auto& name : options.backends) run_backend(*ctx, lockstep, report, name, progress);
        // Every importer unmaps before any exporter frees.
        lockstep.begin_step();
        lockstep.phase("unmap", [&] {
          ctx->unmap_peer();
          return std::string();
        });
        lockstep.phase("free", [&] {
          ctx.reset();
          return std::string();
        });
      },
      [&] { write_report(report, options); });
  return report.exit_code();
}

void write_report(const P2pReport& report, const P2pOptions& options) {
  print_table(report, stdout);
  if (!options.json_path.empty()) write_result_file(to_json(report), options.json_path);
  WrongData wrong;
  for (const auto& step : report.steps) {
    wrong.add(step.wrong.value_or(0), cat(step.backend, " ", mode_name(step.mode), " ", step.bytes, " B"));
  }
  say_wrong_data("p2p", wrong, "bytes", stdout);
}

}  // namespace

}  // namespace pickle::bench
