#include "memcpy_pair.hpp"

#include <unistd.h>

#include <random>

#include "../self_launch.hpp"
#include "core/clock.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "device/backends.hpp"
#include "environment.hpp"
#include "result_file.hpp"

namespace pickle::bench {
namespace {

/// Splits "a\nb\nc" at newlines.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (true) {
    std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return lines;
    start = end + 1;
  }
}

}  // namespace

bool pair_uses_cuda(const PairPlanRequest& request, std::string& why) {
  bool cuda = request.memory == "cuda";
  why = "--memory cuda";
  if (request.memory == "host") {
    why = "--memory host";
  } else if (request.memory.empty()) {
    int gpus = device::cuda_device_count();
    cuda = gpus >= 2;
    why = cuda ? cat(gpus, " GPUs") : gpus == 1 ? std::string("only 1 GPU: host memory")
                                                : cat("no GPU (", device::cuda_unavailable_reason(), "): host memory");
  }
  if (!cuda && !request.gpu_only_option.empty()) {
    throw InvalidArgument(cat(request.gpu_only_option, " needs GPU memory, and this run uses host memory (", why,
                              "); leave it out on host memory"));
  }
  return cuda;
}

PairPlan agree_on_pair_plan(Lockstep& lockstep, int rank, const PairPlanRequest& request) {
  auto outcome = lockstep.phase("plan", [&] {
    std::string payload = hostname();
    if (rank != 0) return payload;
    for (const auto& [path, flag] : request.output_files) require_writable(path, flag);
    std::string why;
    const bool cuda = pair_uses_cuda(request, why);
    return cat(payload, "\n", cuda ? "cuda" : "host", "\n", std::random_device{}(), "-", getpid(), "\n", why);
  });
  require_agreed(outcome, "agreeing on the plan");
  auto zero = lines_of(outcome.payloads[0]);
  auto one = lines_of(outcome.payloads[1]);
  if (zero.size() != 4 || one.empty() || one[0] != zero[0]) {
    throw AgreedFailure(ErrorCode::InvalidArgument,
                      cat("bench ", request.suite, ": ranks 0 and 1 must share a host (rank 0 is on ", zero[0],
                          ", rank 1 on ", one.empty() ? std::string("?") : one[0], ")"));
  }
  PairPlan plan;
  plan.kind = zero[1] == "cuda" ? MemoryKind::Cuda : MemoryKind::Host;
  plan.nonce = zero[2];
  plan.why = zero[3];
  plan.started_utc = utc_now();
  return plan;
}

device::FdChannel connect_pair_channel(const Store& store, const std::string& nonce, std::string_view suite) {
  const std::string name = cat("pickle-bench-", suite, "-", nonce);
  Deadline deadline = Deadline::after_seconds(store.timeout_seconds());
  const int rank = store.self().rank;
  device::FdChannel channel = [&] {
    if (rank == 1) {
      device::FdListener listener(name);
      // Rank 0 connects only after the listener exists (connect retries until then), so no barrier is needed.
      return listener.accept(deadline);
    }
    return device::FdChannel::connect(name, deadline);
  }();
  channel.set_peer(1 - rank);
  return channel;
}

int run_pair_rank(std::string_view suite, const std::function<int(Store&, Lockstep&)>& body) {
  RankInfo self = discover_rank_info();
  log::set_rank(self.rank);
  if (self.world_size < 2) {
    std::fprintf(stderr, "pickle bench %s: needs at least 2 ranks; this job has %d\n", std::string(suite).c_str(),
                 self.world_size);
    return 2;
  }
  try {
    Store store(self);
    Lockstep lockstep(store);
    int code = body(store, lockstep);
    return self.rank == 0 ? code : 0;
  } catch (const AgreedFailure& e) {
    if (self.rank != 0) return 0;
    std::fprintf(stderr, "pickle bench %s: %s\n", std::string(suite).c_str(), e.message().c_str());
    return e.code() == ErrorCode::InvalidArgument ? 2 : 1;
  }
}

int relaunch_pair(const PairPlanRequest& request, const std::vector<std::string>& args) {
  const std::string& suite = request.suite;
  cli::refuse_cuda_memory_without_gpu(request.memory);
  // Before any rank starts (rank 0 checks again, for a launcher of its own): said once, nothing launched.
  for (const auto& [path, flag] : request.output_files) require_writable(path, flag);
  std::string why;
  try {
    pair_uses_cuda(request, why);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "pickle bench %s: %s\n", suite.c_str(), e.message().c_str());
    return 2;
  }
  // These suites measure one exporter and one importer: two ranks, whatever the number of GPUs.
  std::fprintf(stderr, "bench %s: launching 2 ranks (rank 1 exports a buffer, rank 0 imports it)\n",
               std::string(suite).c_str());
  std::fflush(stderr);
  std::vector<std::string> rank_args = {std::string(suite)};
  rank_args.insert(rank_args.end(), args.begin(), args.end());
  // Unprefixed: rank 0 alone prints the table, and the other rank's errors name their rank themselves.
  return cli::relaunch_as_ranks(2, "bench", rank_args, /*prefix_output=*/false);
}

}  // namespace pickle::bench
