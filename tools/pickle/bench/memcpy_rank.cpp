#include "memcpy_rank.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/unique_fd.hpp"
#include "cuda_device.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"
#include "device/fd_channel.hpp"
#include "device/memory.hpp"
#include "p2p_report.hpp"
#include "device/stream.hpp"
#include "environment.hpp"
#include "memcpy_buffers.hpp"
#include "memcpy_pair.hpp"
#include "memcpy_report.hpp"
#include "pattern.hpp"
#include "progress.hpp"
#include "result_file.hpp"
#include "sizes.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {
namespace {

constexpr std::size_t kHostDefaultMax = std::size_t{16} << 20;
constexpr std::size_t kCudaDefaultMax = std::size_t{1} << 30;

std::string encode_samples(const std::vector<double>& samples) {
  std::string text;
  char number[40];
  for (double value : samples) {
    std::snprintf(number, sizeof number, "%.17g ", value);
    text += number;
  }
  return text;
}

std::vector<double> decode_samples(const std::string& text) {
  std::vector<double> samples;
  const char* p = text.c_str();
  while (true) {
    char* end = nullptr;
    double value = std::strtod(p, &end);
    if (end == p) return samples;
    samples.push_back(value);
    p = end;
  }
}

/// Rank 0's handle on rank 1's exported buffer: the descriptor and fd, from which it imports as often as needed.
struct PeerBuffer {
  device::MemoryDescriptor descriptor;
  UniqueFd fd;             ///< memfd or VMM fd; invalid for cudaMalloc memory (the IPC handle is in the descriptor)
  std::size_t offset = 0;  ///< the exported pointer's offset in its allocation

  /// Maps the buffer (every import takes its own duplicate of the fd: importing consumes one).
  std::unique_ptr<device::ImportedMemory> import(int device, std::size_t bytes) const {
    UniqueFd copy;
    if (fd.valid()) {
      copy.reset(::dup(fd.get()));
      if (!copy.valid()) {
        throw SystemError(cat(describe({.rank = 0, .peer = 1, .op = "bench memcpy import", .bytes = bytes}),
                              ": dup of the peer buffer's fd failed"),
                          errno);
      }
    }
    return device::import_memory(descriptor, std::move(copy), device);
  }
};

/// Everything one rank holds during the run.
struct MemcpyState {
  int rank = 0;
  int device = 0;
  MemoryKind kind = MemoryKind::Host;
  std::unique_ptr<device::Stream> stream;
  std::unique_ptr<device::Event> start, stop;
  std::unique_ptr<device::Allocation> buffer;  ///< rank 0: the source; rank 1: the exported destination
  PeerBuffer peer;                              ///< rank 0 only
  std::unique_ptr<device::ImportedMemory> mapping;  ///< rank 0: the persistent mapping of the columns without overhead

  std::uint8_t* src() const { return static_cast<std::uint8_t*>(buffer->data()); }
  std::uint8_t* mapped_dst() const { return static_cast<std::uint8_t*>(mapping->data()) + peer.offset; }
};

std::vector<double> copy_async(MemcpyState& s, std::size_t bytes, const MemcpyOptions& o) {
  for (int i = 0; i < o.warmup; ++i) s.stream->copy(s.mapped_dst(), s.src(), bytes);
  s.stream->synchronize();
  s.stream->record(*s.start);
  for (int i = 0; i < o.iterations; ++i) s.stream->copy(s.mapped_dst(), s.src(), bytes);
  s.stream->record(*s.stop);
  s.stop->synchronize();
  return {static_cast<double>(s.stop->elapsed_ms(*s.start)) / o.iterations};
}

std::vector<double> copy_sync(MemcpyState& s, std::size_t bytes, const MemcpyOptions& o) {
  std::vector<double> samples;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    Stopwatch watch;
    s.stream->copy(s.mapped_dst(), s.src(), bytes);
    s.stream->synchronize();
    if (i >= o.warmup) samples.push_back(watch.seconds() * 1e3);
  }
  return samples;
}

std::vector<double> copy_with_overhead(MemcpyState& s, std::size_t bytes, const MemcpyOptions& o) {
  std::vector<double> samples;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    Stopwatch watch;
    auto mapping = s.peer.import(s.device, bytes);
    s.stream->copy(static_cast<std::uint8_t*>(mapping->data()) + s.peer.offset, s.src(), bytes);
    s.stream->synchronize();
    mapping.reset();
    if (i >= o.warmup) samples.push_back(watch.seconds() * 1e3);
  }
  return samples;
}

/// One column at one size: rank 1 poisons, rank 0 copies (timed), rank 1 checks. False when a phase failed.
/// A LockstepBroken goes on, the size marked failed with it for the report that rank 0 still writes.
bool run_column(Lockstep& lockstep, MemcpyState& s, const char* name, std::size_t bytes, MemcpyRow& row,
                MemcpyColumn& column, const std::function<std::vector<double>()>& copy) {
  PhaseOutcome timed, checked;
  try {
    lockstep.phase(cat("poison ", name, " ", bytes), [&] {
      if (s.rank == 1) poison(*s.stream, s.buffer->data(), bytes);
      return std::string();
    });
    timed = lockstep.phase(cat(name, " ", bytes), [&] {
      return s.rank == 0 ? encode_samples(copy()) : std::string();
    });
    checked = lockstep.phase(cat("check ", name, " ", bytes), [&] {
      return s.rank == 1 ? cat(count_wrong_at(*s.stream, s.buffer->data(), bytes, /*sender=*/0)) : std::string();
    });
  } catch (const LockstepBroken& e) {
    row.error = cat(name, ": ", e.message());
    throw;
  }
  if (lockstep.failed()) {
    row.error = cat(name, ": ", lockstep.error());
    return false;
  }
  column.samples_ms = decode_samples(timed.payloads[0]);
  column.wrong = std::strtoull(checked.payloads[1].c_str(), nullptr, 10);
  return true;
}

/// Pass 1: the columns without overhead at every size, on the persistent mapping; a size that fails ends the pass.
void sweep_without_overhead(Lockstep& lockstep, MemcpyState& s, MemcpyReport& report,
                            const std::vector<std::size_t>& sizes, const MemcpyOptions& options, Progress& progress) {
  for (std::size_t bytes : sizes) {
    MemcpyRow& row = report.rows.emplace_back();
    row.bytes = bytes;
    lockstep.begin_step();
    bool ok = run_column(lockstep, s, "async", bytes, row, row.async, [&] { return copy_async(s, bytes, options); }) &&
              run_column(lockstep, s, "sync", bytes, row, row.sync, [&] { return copy_sync(s, bytes, options); });
    progress.step(static_cast<double>(bytes) + (1 << 20), cat("without overhead ", short_size(bytes)));
    if (!ok) break;
  }
}

/// The persistent mapping goes before pass 2: cudaIpcOpenMemHandle of a handle this process has open only counts a
/// reference, so "with overhead" would time nothing while it exists. A LockstepBroken here cuts pass 2 off before
/// its first size, which is then the size marked failed (a cut that no row owned left every row ok and the overhead
/// column empty without a word).
void unmap_persistent(Lockstep& lockstep, MemcpyState& s, MemcpyReport& report) {
  lockstep.begin_step();
  try {
    require_agreed(lockstep.phase("unmap",
                                 [&] {
                                   s.mapping.reset();
                                   return std::string();
                                 }),
                  "releasing the mapping");
  } catch (const LockstepBroken& e) {
    if (!report.rows.empty() && report.rows.front().error.empty()) {
      report.rows.front().error = cat("overhead: ", e.message());
    }
    throw;
  }
}

/// Pass 2, unless pass 1 failed: per copy, import + copy + synchronize + release, at the sizes of pass 1.
void sweep_with_overhead(Lockstep& lockstep, MemcpyState& s, MemcpyReport& report, const MemcpyOptions& options,
                         Progress& progress) {
  bool failed =
      std::any_of(report.rows.begin(), report.rows.end(), [](const MemcpyRow& r) { return !r.error.empty(); });
  for (std::size_t i = 0; i < report.rows.size() && !failed; ++i) {
    MemcpyRow& row = report.rows[i];
    lockstep.begin_step();
    failed = !run_column(lockstep, s, "overhead", row.bytes, row, row.overhead,
                         [&] { return copy_with_overhead(s, row.bytes, options); });
    progress.step(static_cast<double>(row.bytes) + (1 << 20), cat("with overhead ", short_size(row.bytes)));
  }
}

/// Rank 0's fd and mappings go before rank 1 frees its buffer.
void release_buffers(Lockstep& lockstep, MemcpyState& s) {
  lockstep.begin_step();
  lockstep.phase("release", [&] {
    s.peer.fd.reset();
    s.mapping.reset();
    return std::string();
  });
  lockstep.phase("free", [&] {
    if (s.stream) s.stream->synchronize();
    s.buffer.reset();
    return std::string();
  });
}

/// Rank 0's output: the table on stdout, and the --csv and --json files.
void write_report(const MemcpyReport& report) {
  print_memcpy_table(report, stdout);
  if (!report.options.csv_path.empty()) write_memcpy_csv(report, report.options.csv_path);
  if (!report.options.json_path.empty()) write_result_file(memcpy_to_json(report), report.options.json_path);
  WrongData wrong;
  for (const auto& row : report.rows) wrong.add(row.wrong(), cat(row.bytes, " B"));
  say_wrong_data("memcpy", wrong, "bytes", stdout);
}

}  // namespace

PairPlanRequest memcpy_plan_request(const MemcpyOptions& options) {
  return {.suite = "memcpy",
          .memory = options.memory,
          .output_files = {{options.csv_path, "--csv"}, {options.json_path, "--json"}},
          .gpu_only_option = options.method.empty() ? "" : "--method " + options.method};
}

int run_memcpy_rank(Store& store, Lockstep& lockstep, const MemcpyOptions& options,
                    const std::vector<std::string>& args) {
  const RankInfo& self = store.self();
  PairPlan plan = agree_on_pair_plan(lockstep, self.rank, memcpy_plan_request(options));

  MemcpyReport report;
  report.options = options;
  report.command = {"pickle", "bench", "memcpy"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = plan.started_utc;
  report.memory = plan.kind;
  report.plan_why = plan.why;
  report.world_size = self.world_size;

  MemcpyState s;
  s.rank = self.rank;
  s.kind = plan.kind;
  s.device = plan.kind == MemoryKind::Cuda ? rank_device(self.local_rank) : 0;
  const bool active = self.rank < 2;
  auto context = lockstep.phase("context", [&] {
    if (!active) return std::string();
    if (s.kind == MemoryKind::Cuda) bind_cuda_device(s.device);
    s.stream = device::make_stream(s.kind, s.device);
    s.start = device::make_event(s.kind, s.device);
    s.stop = device::make_event(s.kind, s.device);
    return s.kind == MemoryKind::Cuda ? gpu_identity(s.device) : std::string();
  });
  require_agreed(context, "creating the stream and events");
  record_shared_gpu(report, shared_gpu_note(context.payloads));

  std::size_t max_bytes = sweep_max_bytes(options, plan.kind == MemoryKind::Cuda ? kCudaDefaultMax : kHostDefaultMax);
  std::vector<std::size_t> sizes = size_sweep(options.min_bytes, max_bytes, options.factor);
  device::AllocMethod method = options.method == "vmm"          ? device::AllocMethod::CudaVmm
                               : options.method == "cudaMalloc" ? device::AllocMethod::CudaMalloc
                                                                : device::AllocMethod::Default;
  auto allocated = lockstep.phase("allocate", [&] {
    if (!active) return std::string();
    // Sized inside the phase: a size that cannot fit is refused by both ranks together, and said once.
    const std::size_t wanted = sweep_buffer_bytes(plan.kind, sizes);
    s.buffer = allocate_up_to(s.kind, wanted, sizes.front(), s.device,
                              s.rank == 1 ? method : device::AllocMethod::Default);
    return cat(s.buffer->bytes(), " ", device::alloc_method_name(s.buffer->method()));
  });
  require_agreed(allocated, "allocating the buffers");
  std::size_t capacity = std::min(std::strtoull(allocated.payloads[0].c_str(), nullptr, 10),
                                  std::strtoull(allocated.payloads[1].c_str(), nullptr, 10));
  report.method = allocated.payloads[1].substr(allocated.payloads[1].find(' ') + 1);
  if (plan.kind == MemoryKind::Host) report.method = "memfd";
  std::size_t planned = sizes.size();
  std::erase_if(sizes, [&](std::size_t size) { return size > capacity; });
  if (sizes.size() < planned) {
    report.notes.push_back(cat("sizes above ", human_bytes(capacity), " skipped: a buffer of the next size does not fit ",
                               plan.kind == MemoryKind::Cuda ? "in free GPU memory" : "in a tenth of MemAvailable"));
  }

  require_agreed(lockstep.phase("exchange",
                               [&] {
                                 if (!active) return std::string();
                                 device::FdChannel channel = connect_pair_channel(store, plan.nonce, "memcpy");
                                 Deadline deadline = Deadline::after_seconds(store.timeout_seconds());
                                 if (s.rank == 1) {
                                   auto exported = device::export_memory(s.buffer->data());
                                   channel.send(device::serialize(exported.descriptor), exported.fd.get(), deadline);
                                   channel.send(std::span<const std::byte>(
                                                    reinterpret_cast<const std::byte*>(&exported.offset),
                                                    sizeof exported.offset),
                                                deadline);
                                   channel.recv(deadline);  // rank 0 has what it needs: the channel may close
                                 } else {
                                   auto message = channel.recv(deadline);
                                   s.peer.descriptor = device::parse_descriptor(message.bytes);
                                   s.peer.fd = std::move(message.fd);
                                   auto offset = channel.recv(deadline);
                                   if (offset.bytes.size() != sizeof s.peer.offset) {
                                     throw ProtocolError(cat(describe({.rank = 0, .peer = 1, .op = "bench memcpy exchange"}),
                                                             ": the buffer offset has ", offset.bytes.size(), " bytes"));
                                   }
                                   std::memcpy(&s.peer.offset, offset.bytes.data(), sizeof s.peer.offset);
                                   char ack = 1;
                                   channel.send(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&ack), 1),
                                                deadline);
                                   s.mapping = s.peer.import(s.device, capacity);
                                   if (s.mapping->bytes() < s.peer.offset + capacity) {
                                     throw ProtocolError(cat(describe({.rank = 0, .peer = 1, .op = "bench memcpy exchange",
                                                                       .bytes = capacity}),
                                                             ": the peer's buffer has only ",
                                                             s.mapping->bytes() - s.peer.offset, " bytes"));
                                   }
                                 }
                                 return std::string();
                               }),
                "mapping rank 1's buffer");
  require_agreed(lockstep.phase("fill",
                               [&] {
                                 if (s.rank != 0) return std::string();
                                 fill_pattern(*s.stream, s.buffer->data(), capacity, 0);
                                 if (env::get_bool("PICKLE_BENCH_CORRUPT")) {
                                   // Test hook: one flipped source byte inside every size, so every check must
                                   // count it.
                                   std::uint8_t flipped = static_cast<std::uint8_t>(~source_byte(0, sizes.front() / 2));
                                   s.stream->copy(s.src() + sizes.front() / 2, &flipped, 1);
                                   s.stream->synchronize();
                                 }
                                 return std::string();
                               }),
                "filling the pattern buffer");

  double total_work = 0;
  for (std::size_t bytes : sizes) total_work += 2.0 * (static_cast<double>(bytes) + (1 << 20));
  Progress progress(total_work, static_cast<int>(2 * sizes.size()), stderr, self.rank == 0, "bench memcpy");

  // A rank that stops or dies ends the run with the sizes measured before, the one it cut off failed.
  lockstep.run_then_report(
      "memcpy",
      [&] {
        sweep_without_overhead(lockstep, s, report, sizes, options, progress);
        unmap_persistent(lockstep, s, report);
        sweep_with_overhead(lockstep, s, report, options, progress);
        release_buffers(lockstep, s);
      },
      [&] { write_report(report); });
  return report.exit_code();
}

}  // namespace pickle::bench
