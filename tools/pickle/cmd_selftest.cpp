// `pickle selftest`: an end-to-end check of the foundation layers on this machine. Every rank exports a buffer to
// its left neighbour, which maps it and writes a rank-specific pattern into it with a stream copy followed by a
// stream write-value on a flag; the owner waits on the flag with a stream wait-value and checks every byte.
// With GPUs the copies are GPU-to-GPU over the peer mapping (copy engines); without, the same code runs on host memory.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "bench/environment.hpp"
#include "bench/lockstep.hpp"
#include "bench/pattern.hpp"
#include "bench/sizes.hpp"
#include "bench/sweep_options.hpp"
#include "commands.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/backends.hpp"
#include "device/descriptor.hpp"
#include "device/export.hpp"
#include "device/fd_channel.hpp"
#include "device/memory.hpp"
#include "device/stream.hpp"
#include "self_launch.hpp"

namespace pickle::cli {
namespace {

constexpr const char* kUsage =
    "usage: pickle selftest [--ranks N] [--bytes B] [--memory host|cuda]\n"
    "\n"
    "Moves a checked pattern from every rank into its right neighbour's exported buffer (stream copy, then a\n"
    "stream write-value on a flag the owner waits for) and reports wrong bytes. Started alone it launches its own\n"
    "ranks: one per GPU, or 2 host-memory ranks without GPUs.\n";

struct Options {
  int ranks = 0;
  std::size_t bytes = 64ull << 20;
  std::string memory;  // "" = cuda when every local rank has a GPU, else host
  bool help = false;
};

Options parse(const Args& args) {
  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw InvalidArgument(cat(args[i], " needs a value"));
      return args[++i];
    };
    if (args[i] == "--ranks") options.ranks = static_cast<int>(bench::parse_int(value(), "--ranks", 2, 4096));
    else if (args[i] == "--bytes") options.bytes = bench::parse_size(value(), "--bytes");
    else if (args[i] == "--memory") options.memory = value();
    else if (args[i] == "-h" || args[i] == "--help") options.help = true;
    else {
      throw InvalidArgument(cat("unknown option '", args[i], "'\n", kUsage));
    }
  }
  if (!options.memory.empty() && options.memory != "host" && options.memory != "cuda") {
    throw InvalidArgument(cat("--memory ", options.memory, ": use host or cuda"));
  }
  return options;
}

/// Host memory is taken lazily: buffers past what the machine has would have the OOM killer end a rank without a
/// word, and a pattern of --bytes 1T threw a bare std::bad_alloc. Each rank holds its pattern, the zeros that clear
/// its inbox and what it received in host memory, and its inbox and outbox too where the run uses host memory.
void refuse_beyond_host_memory(std::size_t bytes, bool use_cuda, int local_ranks) {
  const std::uint64_t available = bench::host_memory_available();
  const std::uint64_t buffers = (use_cuda ? 3 : 5) * static_cast<std::uint64_t>(local_ranks);
  // (Found by review, 2026-11-29j: 4 ranks x 5 x 1 GiB against 23 GiB passed, and the OOM killer ended a rank.)
  const std::uint64_t room = available == 0 ? 0 : bench::host_buffer_room(available, buffers);
  if (available == 0 || bytes <= room) return;
  throw InvalidArgument(cat("--bytes ", bench::short_size(bytes), " does not fit: the ", local_ranks,
                            " ranks of this host hold ", buffers, " buffers of that size in host memory, which may take "
                            "three quarters of MemAvailable (", human_bytes(available), "): at most ",
                            human_bytes(room), " each; ask for less"));
}

bool uses_cuda(const Options& options, int local_ranks) {
  return options.memory == "cuda" || (options.memory.empty() && device::cuda_device_count() >= local_ranks);
}

int run_rank(const Options& options) {
  RankInfo self = discover_rank_info();
  log::set_rank(self.rank);
  if (self.world_size < 2) throw InvalidArgument("selftest needs at least 2 ranks");
  bool use_cuda = uses_cuda(options, self.local_world_size);
  MemoryKind kind = use_cuda ? MemoryKind::Cuda : MemoryKind::Host;
  int gpu = use_cuda ? self.local_rank : 0;
  try {
    refuse_beyond_host_memory(options.bytes, use_cuda, self.local_world_size);  // before the store: nothing to wait for
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(cat("rank ", self.rank, ": ", e.message()));
  }

  Store store(self);
  const int rank = self.rank, world = self.world_size;
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;

  // The receive buffer ends with a 64-byte-aligned flag word that the writer bumps after its copy.
  const std::size_t flag_offset = (options.bytes + 63) / 64 * 64;
  auto inbox = device::allocate(kind, flag_offset + 64, gpu);
  auto outbox = device::allocate(kind, options.bytes, gpu);
  auto stream = device::make_stream(kind, gpu);

  // The benchmarks' checked pattern: rank r's source stream, from its start.
  std::vector<std::uint8_t> host(options.bytes);
  bench::fill_source(rank, 0, host.data(), host.size());
  std::vector<std::uint8_t> zeros(flag_offset + 64, 0);
  stream->copy(inbox->data(), zeros.data(), zeros.size());
  stream->copy(outbox->data(), host.data(), host.size());
  stream->synchronize();

  // Rank 0 picks a nonce so that concurrent jobs on one host never share socket names.
  if (rank == 0) store.set("selftest/nonce", cat(std::random_device{}(), "-", self.master_port));
  const std::string prefix = cat("pickle-selftest-", store.get_string("selftest/nonce"), "-");
  device::FdListener listener(prefix + std::to_string(rank));
  store.barrier("selftest/listening");

  Deadline deadline = Deadline::after_seconds(store.timeout_seconds());
  auto to_right = device::FdChannel::connect(prefix + std::to_string(right), deadline);
  to_right.set_peer(right);
  auto from_left = listener.accept(deadline);
  from_left.set_peer(left);

  // Hand my inbox to my left neighbour; map my right neighbour's inbox.
  auto exported = device::export_memory(inbox->data());
  from_left.send(device::serialize(exported.descriptor), exported.fd.get(), deadline);
  auto message = to_right.recv(deadline);
  Stopwatch import_watch;
  auto remote = device::import_memory(device::parse_descriptor(message.bytes), std::move(message.fd), gpu);
  double import_ms = import_watch.seconds() * 1e3;

  auto* remote_bytes = static_cast<std::uint8_t*>(remote->data());
  auto* remote_flag = reinterpret_cast<std::uint32_t*>(remote_bytes + flag_offset);
  auto* my_flag = reinterpret_cast<std::uint32_t*>(static_cast<std::uint8_t*>(inbox->data()) + flag_offset);

  auto start = device::make_event(kind, gpu), stop = device::make_event(kind, gpu);
  stream->record(*start);
  stream->copy(remote_bytes, outbox->data(), options.bytes);
  stream->record(*stop);
  stream->write_value(remote_flag, 1);
  stream->wait_value(my_flag, 1);
  std::vector<std::uint8_t> received(options.bytes);
  stream->copy(received.data(), inbox->data(), options.bytes);
  stream->synchronize();
  double copy_ms = stop->elapsed_ms(*start);

  const std::size_t wrong = bench::count_wrong(received.data(), received.size(), left, 0);
  std::printf("selftest: rank %d received %s from rank %d through %s memory: %zu wrong bytes "
              "(copy %.3f ms = %.1f GB/s, import %.2f ms)\n",
              rank, human_bytes(options.bytes).c_str(), left, std::string(memory_kind_name(kind)).c_str(), wrong,
              copy_ms, copy_ms > 0 ? static_cast<double>(options.bytes) / (copy_ms * 1e6) : 0.0, import_ms);

  // Every importer unmaps before any exporter frees.
  store.barrier("selftest/checked");
  remote.reset();
  store.barrier("selftest/unmapped");
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int cmd_selftest(const Args& args) {
  Options options;
  try {
    options = parse(args);
  } catch (const InvalidArgument& e) {
    // Usage errors exit 2, as every other command's do.
    std::fprintf(stderr, "pickle selftest: %s\n\n%s", bench::plain_message(e).c_str(), kUsage);
    return 2;
  }
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (running_as_rank()) return run_rank(options);
  // Every rank reads PICKLE_TIMEOUT first: a bad value is said once here, with nothing launched (as `pickle bench`
  // does), rather than by each rank and then by the launcher stopping the others.
  env::timeout_seconds();
  std::string why;
  int ranks = default_rank_count(options.ranks, options.memory, why);
  // Said once, before any rank starts (the ranks check again, under a launcher of their own); exit 1.
  refuse_beyond_host_memory(options.bytes, uses_cuda(options, ranks), ranks);
  std::printf("selftest: %s\n", why.c_str());
  std::fflush(stdout);
  int code = relaunch_as_ranks(ranks, "selftest", args);
  std::printf("selftest: %s\n", code == 0 ? "passed" : "FAILED");
  return code;
}

}  // namespace pickle::cli
