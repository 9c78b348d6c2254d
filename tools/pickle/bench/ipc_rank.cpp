#include "ipc_rank.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <utility>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "core/unique_fd.hpp"
#include "cuda_device.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"
#include "device/fd_channel.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "environment.hpp"
#include "ipc_cache.hpp"
#include "ipc_report.hpp"
#include "memcpy_buffers.hpp"
#include "memcpy_pair.hpp"
#include "pattern.hpp"
#include "progress.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {
namespace {

constexpr std::size_t kHostDefaultMax = std::size_t{16} << 20;
constexpr std::size_t kCudaDefaultMax = std::size_t{4} << 30;
/// CUDA's out-of-memory code, the same number for the runtime and the driver.
constexpr int kCudaOutOfMemory = 2;
/// Bytes written and checked at each end of a buffer: enough to see a mapping of the wrong memory, cheap at 4 GiB.
constexpr std::size_t kEndBytes = 64 * 1024;

/// The checked ranges of a buffer: the whole of a small one, else its first and last kEndBytes (the tail starting
/// at a multiple of 8, as pattern positions must).
std::vector<std::pair<std::size_t, std::size_t>> checked_ranges(std::size_t bytes) {
  if (bytes <= 2 * kEndBytes) return {{0, bytes}};
  std::size_t tail = (bytes - kEndBytes) & ~std::size_t{7};
  return {{0, kEndBytes}, {tail, bytes - tail}};
}

void fill_ends(device::Stream& stream, void* data, std::size_t bytes, int rank) {
  auto* out = static_cast<std::uint8_t*>(data);
  for (auto [first, length] : checked_ranges(bytes)) {
    std::vector<std::uint8_t> staging(length);
    fill_source(rank, first, staging.data(), length);
    stream.copy(out + first, staging.data(), length);
    stream.synchronize();
  }
}

std::uint64_t count_wrong_ends(device::Stream& stream, const void* data, std::size_t bytes, int sender) {
  const auto* in = static_cast<const std::uint8_t*>(data);
  std::uint64_t wrong = 0;
  for (auto [first, length] : checked_ranges(bytes)) wrong += count_wrong_at(stream, in + first, length, sender, first);
  return wrong;
}

device::AllocMethod method_of(const std::string& name) {
  if (name == "cudaMalloc") return device::AllocMethod::CudaMalloc;
  if (name == "vmm") return device::AllocMethod::CudaVmm;
  return device::AllocMethod::Default;
}

std::string encode(const std::vector<double>& values) {
  std::string text;
  char number[40];
  for (double value : values) {
    std::snprintf(number, sizeof number, "%.17g ", value);
    text += number;
  }
  return text;
}

/// "a b c|d e|f g|w": open, close and re-open samples, then the wrong-byte count.
void decode(const std::string& text, IpcRow& row) {
  std::vector<double>* lists[] = {&row.open_us, &row.close_us, &row.reopen_us};
  const char* p = text.c_str();
  for (auto* list : lists) {
    while (true) {
      char* end = nullptr;
      double value = std::strtod(p, &end);
      if (end == p) break;
      list->push_back(value);
      p = end;
    }
    while (*p == ' ') ++p;
    if (*p == '|') ++p;
  }
  row.wrong = std::strtoull(p, nullptr, 10);
}

/// Rank 0: imports the exported buffer warmup + repeats times (each with its own duplicate of the fd).
std::string measure_imports(device::Stream& stream, const device::MemoryDescriptor& descriptor, const UniqueFd& fd,
                            int device, std::size_t bytes, const IpcOptions& o) {
  auto import = [&] {
    UniqueFd copy;
    if (fd.valid()) {
      copy.reset(::dup(fd.get()));
      if (!copy.valid()) {
        throw SystemError(cat(describe({.rank = 0, .peer = 1, .op = "bench ipc import", .bytes = bytes}),
                              ": dup of the exported fd failed"),
                          errno);
      }
    }
    return device::import_memory(descriptor, std::move(copy), device);
  };
  std::vector<double> open_us, close_us, reopen_us;
  std::uint64_t wrong = 0;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    Stopwatch watch;
    auto mapping = import();
    double open = watch.micros();
    watch.reset();
    mapping.reset();
    double close = watch.micros();
    watch.reset();
    mapping = import();
    double reopen = watch.micros();
    // Checked through the re-opened mapping, after the timing, so that no timed call follows a use of it.
    if (i == o.warmup) wrong = count_wrong_ends(stream, mapping->data(), bytes, /*sender=*/1);
    mapping.reset();
    if (i < o.warmup) continue;
    open_us.push_back(open);
    close_us.push_back(close);
    reopen_us.push_back(reopen);
  }
  return cat(encode(open_us), "|", encode(close_us), "|", encode(reopen_us), "|", wrong);
}

/// What a rank measures the sizes with: where it is, its stream, and the fd channel between ranks 0 and 1.
struct IpcSide {
  const Store* store = nullptr;
  int rank = 0;
  MemoryKind kind = MemoryKind::Host;
  int device = 0;
  std::unique_ptr<device::Stream> stream;
  std::optional<device::FdChannel> channel;

  Deadline deadline() const { return Deadline::after_seconds(store->timeout_seconds()); }
};

/// Rank 1: allocates `bytes` with `method`, writes its pattern at both ends and sends the export to rank 0.
std::unique_ptr<device::Allocation> export_buffer(IpcSide& side, const std::string& method, std::size_t bytes) {
  std::unique_ptr<device::Allocation> allocation;
  try {
    allocation = device::allocate(side.kind, bytes, side.device, method_of(method));
  } catch (const CudaError& e) {
    if (e.cuda_code() != kCudaOutOfMemory) throw;
    throw UnavailableError(cat(describe({.rank = 1, .op = "bench ipc allocation", .bytes = bytes}),
                               ": out of GPU memory"));
  }
  fill_ends(*side.stream, allocation->data(), bytes, 1);
  auto out = device::export_memory(allocation->data());
  if (out.offset != 0) {
    throw Error(ErrorCode::Internal, "bench ipc: a buffer from device::allocate does not start its allocation");
  }
  side.channel->send(device::serialize(out.descriptor), out.fd.get(), side.deadline());
  return allocation;
}

/// One method at one size, in three agreed phases: rank 1 exports a buffer, rank 0 imports it again and again,
/// rank 1 frees it. Fills `row`; false when this method goes no further (a failure, or no memory for this size).
/// A LockstepBroken goes on, the size marked failed with it for the report that rank 0 still writes.
bool measure_size(IpcSide& side, Lockstep& lockstep, const IpcOptions& options, IpcRow& row) {
  std::unique_ptr<device::Allocation> allocation;  // rank 1
  device::MemoryDescriptor descriptor;             // rank 0
  UniqueFd fd;                                     // rank 0
  PhaseOutcome exported, measured;
  lockstep.begin_step();
  try {
    exported = lockstep.phase(cat("export ", row.method, " ", row.bytes), [&] {
      if (side.rank == 1) allocation = export_buffer(side, row.method, row.bytes);
      return std::string();
    });
    measured = lockstep.phase(cat("import ", row.method, " ", row.bytes), [&] {
      if (side.rank != 0) return std::string();
      auto message = side.channel->recv(side.deadline());
      descriptor = device::parse_descriptor(message.bytes);
      fd = std::move(message.fd);
      return measure_imports(*side.stream, descriptor, fd, side.device, row.bytes, options);
    });
    // Every mapping of rank 0 is gone (measure_imports releases each one) before rank 1 frees.
    lockstep.phase(cat("free ", row.method, " ", row.bytes), [&] {
      fd.reset();
      allocation.reset();
      return std::string();
    });
  } catch (const LockstepBroken& e) {
    row.status = IpcRow::Status::Failed;
    row.detail = e.message();
    throw;
  }
  if (!exported.ok && exported.code == ErrorCode::Unavailable) {
    row.status = IpcRow::Status::Unavailable;
    row.detail = exported.error;
    return false;  // a larger buffer of the same method does not fit either
  }
  if (lockstep.failed()) {
    row.status = IpcRow::Status::Failed;
    row.detail = lockstep.error();
    return false;  // the channel may be out of step for this method; the next method starts afresh
  }
  decode(measured.payloads[0], row);
  return true;
}

/// Every method at every size, in order; a size that fails ends its method.
void sweep_sizes(IpcSide& side, Lockstep& lockstep, const IpcOptions& options, const std::vector<std::string>& methods,
                 const std::vector<std::size_t>& sizes, IpcReport& report, Progress& progress) {
  for (const auto& method : methods) {
    for (std::size_t bytes : sizes) {
      IpcRow& row = report.rows.emplace_back();
      row.method = method;
      row.bytes = bytes;
      const bool go_on = measure_size(side, lockstep, options, row);
      progress.step(static_cast<double>(bytes) / 1e6 + 1, cat(method, " ", short_size(bytes)));
      if (!go_on) break;
    }
  }
}

/// Rank 0's output: the table on stdout, and the --json file.
void write_report(const IpcReport& report) {
  print_ipc_table(report, stdout);
  if (!report.options.json_path.empty()) write_result_file(ipc_to_json(report), report.options.json_path);
}

}  // namespace

PairPlanRequest ipc_plan_request(const IpcOptions& options) {
  std::string methods_flag;
  for (const auto& method : options.methods) methods_flag += (methods_flag.empty() ? "" : ",") + method;
  return {.suite = "ipc",
          .memory = options.memory,
          .output_files = {{options.json_path, "--json"}},
          .gpu_only_option = methods_flag.empty() ? "" : "--method " + methods_flag};
}

int run_ipc_rank(Store& store, Lockstep& lockstep, const IpcOptions& options, const std::vector<std::string>& args) {
  const RankInfo& self = store.self();
  PairPlan plan = agree_on_pair_plan(lockstep, self.rank, ipc_plan_request(options));
  IpcReport report;
  report.options = options;
  report.command = {"pickle", "bench", "ipc"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = plan.started_utc;
  report.memory = plan.kind;
  report.plan_why = plan.why;
  report.world_size = self.world_size;

  const bool active = self.rank < 2;
  IpcSide side;
  side.store = &store;
  side.rank = self.rank;
  side.kind = plan.kind;
  side.device = plan.kind == MemoryKind::Cuda ? rank_device(self.local_rank) : 0;
  auto context = lockstep.phase("context", [&] {
    if (!active) return std::string();
    if (plan.kind == MemoryKind::Cuda) bind_cuda_device(side.device);
    side.stream = device::make_stream(plan.kind, side.device);
    side.channel.emplace(connect_pair_channel(store, plan.nonce, "ipc"));
    return plan.kind == MemoryKind::Cuda ? gpu_identity(side.device) : std::string();
  });
  require_agreed(context, "creating the stream and the fd channel");
  record_shared_gpu(report, shared_gpu_note(context.payloads));

  std::vector<std::string> methods = options.methods;
  if (plan.kind == MemoryKind::Host) methods = {"memfd"};
  else if (methods.empty()) methods = {"cudaMalloc", "vmm"};
  std::size_t max_bytes = sweep_max_bytes(options, plan.kind == MemoryKind::Cuda ? kCudaDefaultMax : kHostDefaultMax);
  if (plan.kind == MemoryKind::Host) {
    std::uint64_t available = host_memory_available();
    if (available > 0 && max_bytes > std::max<std::uint64_t>(available / 8, options.min_bytes)) {
      max_bytes = std::max<std::size_t>(available / 8, options.min_bytes);
      report.notes.push_back(cat("sizes above ", human_bytes(max_bytes), " skipped: an eighth of MemAvailable"));
    }
  }
  std::vector<std::size_t> sizes = size_sweep(options.min_bytes, max_bytes, options.factor);

  double total_work = 0;
  for (std::size_t bytes : sizes) total_work += static_cast<double>(bytes) / 1e6 + 1;
  total_work *= static_cast<double>(methods.size());
  Progress progress(total_work, static_cast<int>(sizes.size() * methods.size()), stderr, self.rank == 0, "bench ipc");

  // A rank that stops or dies ends the run with what was measured before, the size or the cache it cut off failed.
  lockstep.run_then_report(
      "ipc",
      [&] {
        sweep_sizes(side, lockstep, options, methods, sizes, report, progress);
        if (self.rank == 0) {
          // Its own line: the sizes' progress says nothing of it, and a large -n keeps it busy for seconds.
          std::fprintf(stderr, "bench ipc: pickle's mapping cache: the first transfer, then %d more\n",
                       options.iterations);
          std::fflush(stderr);
        }
        measure_ipc_cache(store, lockstep, plan.kind, side.device, options.iterations, report.cache);
        lockstep.begin_step();
        lockstep.phase("close", [&] {
          side.channel.reset();
          side.stream.reset();
          return std::string();
        });
      },
      [&] { write_report(report); });
  return report.exit_code();
}

}  // namespace pickle::bench
