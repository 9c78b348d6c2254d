#include "ipc_rank.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

}  // namespace

int run_ipc_rank(Store& store, Lockstep& lockstep, const IpcOptions& options, const std::vector<std::string>& args) {
  const RankInfo& self = store.self();
  std::string methods_flag;
  for (const auto& method : options.methods) methods_flag += (methods_flag.empty() ? "" : ",") + method;
  PairPlan plan = agree_on_pair_plan(lockstep, self.rank,
                                     {.suite = "ipc",
                                      .memory = options.memory,
                                      .output_files = {{options.json_path, "--json"}},
                                      .gpu_only_option = methods_flag.empty() ? "" : "--method " + methods_flag});
  IpcReport report;
  report.options = options;
  report.command = {"pickle", "bench", "ipc"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = plan.started_utc;
  report.memory = plan.kind;
  report.plan_why = plan.why;
  report.world_size = self.world_size;

  const bool active = self.rank < 2;
  const int device = plan.kind == MemoryKind::Cuda ? rank_device(self.local_rank) : 0;
  std::unique_ptr<device::Stream> stream;
  std::optional<device::FdChannel> channel;
  auto context = lockstep.phase("context", [&] {
    if (!active) return std::string();
    if (plan.kind == MemoryKind::Cuda) bind_cuda_device(device);
    stream = device::make_stream(plan.kind, device);
    channel.emplace(connect_pair_channel(store, plan.nonce, "ipc"));
    return plan.kind == MemoryKind::Cuda ? gpu_identity(device) : std::string();
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

  for (const auto& method : methods) {
    for (std::size_t bytes : sizes) {
      IpcRow& row = report.rows.emplace_back();
      row.method = method;
      row.bytes = bytes;
      std::unique_ptr<device::Allocation> allocation;  // rank 1
      device::MemoryDescriptor descriptor;             // rank 0
      UniqueFd fd;                                     // rank 0
      lockstep.begin_step();
      auto exported = lockstep.phase(cat("export ", method, " ", bytes), [&] {
        if (self.rank != 1) return std::string();
        try {
          allocation = device::allocate(plan.kind, bytes, device, method_of(method));
        } catch (const CudaError& e) {
          if (e.cuda_code() != kCudaOutOfMemory) throw;
          throw UnavailableError(cat(describe({.rank = 1, .op = "bench ipc allocation", .bytes = bytes}),
                                     ": out of GPU memory"));
        }
        fill_ends(*stream, allocation->data(), bytes, 1);
        auto out = device::export_memory(allocation->data());
        if (out.offset != 0) {
          throw Error(ErrorCode::Internal, "bench ipc: a buffer from device::allocate does not start its allocation");
        }
        channel->send(device::serialize(out.descriptor), out.fd.get(),
                      Deadline::after_seconds(store.timeout_seconds()));
        return std::string();
      });
      auto measured = lockstep.phase(cat("import ", method, " ", bytes), [&] {
        if (self.rank != 0) return std::string();
        auto message = channel->recv(Deadline::after_seconds(store.timeout_seconds()));
        descriptor = device::parse_descriptor(message.bytes);
        fd = std::move(message.fd);
        return measure_imports(*stream, descriptor, fd, device, bytes, options);
      });
      // Every mapping of rank 0 is gone (measure_imports releases each one) before rank 1 frees.
      lockstep.phase(cat("free ", method, " ", bytes), [&] {
        fd.reset();
        allocation.reset();
        return std::string();
      });
      progress.step(static_cast<double>(bytes) / 1e6 + 1, cat(method, " ", short_size(bytes)));
      if (!exported.ok && exported.code == ErrorCode::Unavailable) {
        row.status = IpcRow::Status::Unavailable;
        row.detail = exported.error;
        break;  // a larger buffer of the same method does not fit either
      }
      if (lockstep.failed()) {
        row.status = IpcRow::Status::Failed;
        row.detail = lockstep.error();
        break;  // the channel may be out of step for this method; the next method starts afresh
      }
      decode(measured.payloads[0], row);
    }
  }

  report.cache = measure_ipc_cache(store, lockstep, plan.kind, device, options.iterations);

  lockstep.begin_step();
  lockstep.phase("close", [&] {
    channel.reset();
    stream.reset();
    return std::string();
  });
  if (self.rank == 0) {
    print_ipc_table(report, stdout);
    if (!options.json_path.empty()) write_result_file(ipc_to_json(report), options.json_path);
  }
  return report.exit_code();
}

}  // namespace pickle::bench
