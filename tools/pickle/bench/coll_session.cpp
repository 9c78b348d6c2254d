#include "coll_session.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "core/format.hpp"
#include "core/log.hpp"
#include "cuda_device.hpp"
#include "device/backends.hpp"
#include "environment.hpp"
#include "parallel_parts.hpp"
#include "result_file.hpp"

namespace pickle::bench {

int run_coll_session(std::string_view suite, const std::function<int(const RankInfo&)>& body) {
  RankInfo self = discover_rank_info();
  log::set_rank(self.rank);
  // A bad PICKLE_BENCH_CHECK_THREADS is the environment's fault, not the command line's: exit 1 (as a set-up error)
  // before any phase, where an agreed InvalidArgument would exit 2. Started alone, `pickle bench` said it already.
  check_threads(self.local_world_size);
  try {
    int code = body(self);
    return self.rank == 0 ? code : 0;
  } catch (const AgreedFailure& e) {
    if (self.rank != 0) return 0;
    std::fprintf(stderr, "pickle bench %s: %s\n", std::string(suite).c_str(), e.message().c_str());
    return e.code() == ErrorCode::InvalidArgument ? 2 : 1;
  }
}

MemoryKind agree_on_memory(Lockstep& lockstep, const RankInfo& self, const std::string& memory,
                           const std::string& json_path) {
  auto outcome = lockstep.phase("plan", [&] {
    if (self.rank != 0) return std::string();
    require_writable(json_path);
    bool cuda = memory == "cuda" || (memory.empty() && device::cuda_device_count() >= self.local_world_size);
    return std::string(cuda ? "cuda" : "host");
  });
  require_agreed(outcome, "agreeing on the plan");
  return outcome.payloads[0] == "cuda" ? MemoryKind::Cuda : MemoryKind::Host;
}

std::size_t first_buffer_bytes(MemoryKind kind, std::size_t smallest, std::size_t largest, int buffers,
                               int local_ranks) {
  if (kind != MemoryKind::Host) return largest;
  const std::uint64_t available = host_memory_available();
  if (available == 0) return largest;
  const auto per_host = static_cast<std::uint64_t>(std::max(1, buffers * local_ranks));
  refuse_beyond_memory(smallest, host_buffer_room(available, per_host),
                       cat("three quarters of MemAvailable shared by ", per_host, " buffers (", buffers, " on each of ",
                           local_ranks, " ranks on this host)"));
  const std::uint64_t share = available / 4 / per_host;
  return std::min<std::size_t>(largest, std::max<std::size_t>(share, smallest));
}

std::unique_ptr<CollContext> make_context(Lockstep& lockstep, Store& store, MemoryKind kind,
                                          std::string& shared_gpu) {
  std::unique_ptr<CollContext> ctx;
  const int device = kind == MemoryKind::Cuda ? rank_device(store.self().local_rank) : 0;
  auto context = lockstep.phase("context", [&] {
    if (kind == MemoryKind::Cuda) bind_cuda_device(device);
    ctx = std::make_unique<CollContext>(store, kind, device);
    return kind == MemoryKind::Cuda ? gpu_identity(device) : std::string();
  });
  require_agreed(context, "creating streams and events");
  shared_gpu = shared_gpu_note(context.payloads);
  return ctx;
}

BackendRun start_backend(CollContext& ctx, Lockstep& lockstep, CollBackend& backend) {
  BackendRun run;
  run.name = std::string(backend.name());
  lockstep.begin_step();
  auto probed = lockstep.phase(cat("probe ", run.name), [&] {
    backend.probe(ctx);
    return std::string();
  });
  if (!probed.ok) {
    run.status = probed.code == ErrorCode::Unavailable ? BackendRun::Status::Unavailable : BackendRun::Status::Failed;
    run.detail = probed.error;
    return run;
  }
  auto set_up = lockstep.phase(cat("setup ", run.name), [&] {
    backend.setup(ctx);
    return backend.detail();
  });
  if (!set_up.ok) {
    run.status = BackendRun::Status::Failed;
    run.detail = cat("set-up: ", set_up.error);
    return run;
  }
  run.detail = set_up.payloads[0];
  return run;
}

void stop_backend(CollContext& ctx, Lockstep& lockstep, std::unique_ptr<CollBackend>& backend, bool failed) {
  if (failed) backend->abandon();
  lockstep.begin_step();
  lockstep.phase(cat("teardown ", backend->name()), [&] {
    ctx.stream().synchronize();
    backend.reset();
    return std::string();
  });
  backend.reset();  // also when the phase failed before it
}

void run_backends(std::unique_ptr<CollContext>& ctx, Lockstep& lockstep, std::string_view suite,
                  const std::vector<std::string>& names,
                  const std::function<std::string(CollBackend&, std::size_t)>& measure, std::vector<BackendRun>& runs,
                  const std::function<void()>& write_report) {
  const auto work = [&] {
    for (std::size_t index = 0; index < names.size(); ++index) {
      std::unique_ptr<CollBackend> backend = make_coll_backend(names[index], cat("bench/", suite, "/", index));
      BackendRun run;
      run.name = backend->name();
      try {
        run = start_backend(*ctx, lockstep, *backend);
        if (run.status == BackendRun::Status::Ok) {
          std::string error = measure(*backend, index);
          if (!error.empty()) {
            run.status = BackendRun::Status::Failed;
            run.detail = error;
          }
        }
      } catch (const LockstepBroken& e) {
        run.status = BackendRun::Status::Failed;
        run.detail = e.message();
        runs.push_back(run);
        // Not torn down: its stream may still hold work against the peer that is gone (end_broken_run).
        (void)backend.release();
        throw;
      }
      runs.push_back(run);
      stop_backend(*ctx, lockstep, backend, run.status == BackendRun::Status::Failed);
    }
    free_context(lockstep, ctx);
  };
  lockstep.run_then_report(suite, work, write_report);  // what was measured before goes out either way
}

void free_context(Lockstep& lockstep, std::unique_ptr<CollContext>& ctx) {
  lockstep.begin_step();
  lockstep.phase("free", [&] {
    ctx.reset();
    return std::string();
  });
}

}  // namespace pickle::bench
