#include "transports_options.hpp"

#include <algorithm>
#include <pickle/error.hpp>

#include "core/format.hpp"
#include "transports_configs.hpp"

namespace pickle::bench {

const char* const kTransportsUsage =
    "usage: pickle bench transports [--runs 3] [--ops p2p,allreduce] [-b 64M] [-e SIZE] [-f 2] [-n N] [-w N]\n"
    "                               [--repeats R] [--ranks N] [--memory host|cuda] [--json FILE]\n"
    "                               [--lanes 1,2,4 [--iface lo]]\n"
    "\n"
    "Seed 000's comparison of a library's fast path (P2P) with its host-staged path (SHM). Each configuration runs\n"
    "in its own process set (NCCL reads its environment once, at initialisation), --runs times, and the table shows\n"
    "every run and their mean at the largest size, with the gain of each fast path over its slow path:\n"
    "  NCCL (default: P2P/NVLink)       pickle bench p2p --backend nccl\n"
    "  NCCL (NCCL_P2P_DISABLE=1: SHM)   the same with NCCL_P2P_DISABLE=1\n"
    "  pickle ipc                       pickle bench p2p --backend pickle with PICKLE_TRANSPORT=ipc\n"
    "  pickle shm                       the same with PICKLE_TRANSPORT=shm\n"
    "allreduce runs `pickle bench coll -c allreduce` the same way (busbw), where this build has that suite.\n"
    "NCCL_NVLS_ENABLE=0 in every child. An unavailable backend (no NCCL, host memory) is a skipped row.\n"
    "\n"
    "  --runs N       process sets per configuration; the table averages them (3)\n"
    "  --ops LIST     comma-separated operations: p2p (unidirectional bandwidth), allreduce (busbw) (p2p,allreduce)\n"
    "  -b SIZE        smallest message (64M; bytes or K/M/G/T)\n"
    "  -e SIZE        largest message (the child suite's default: 1G on GPUs, 16M on host memory, never below -b)\n"
    "  -f FACTOR      multiply the size by FACTOR between steps (2)\n"
    "  -n N, -w N     timed and warm-up iterations, forwarded to each child (default: the child's)\n"
    "  --repeats R    timed repeats per size in each child (default: the child's)\n"
    "  --ranks N      ranks each child launches (default: one per GPU, or 2 host ranks)\n"
    "  --memory KIND  host or cuda, forwarded to each child (default: cuda when there are 2 GPUs)\n"
    "  --json FILE    write every run, the means, the gains, the environment and the topology (docs/bench.md)\n"
    "  --lanes LIST   seed 001's network comparison instead of the four rows above: for each count L, NCCL forced\n"
    "                 onto its network path (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket, L socket\n"
    "                 threads of one socket each; p2p: one channel per peer, L connections; NCCL's allreduce\n"
    "                 keeps its ring channels) and pickle's net transport (PICKLE_TRANSPORT=net, L lanes)\n"
    "  --iface NAME   the interface of both network paths with --lanes (lo)\n";

std::string_view op_name(TransportOp op) noexcept {
  switch (op) {
    case TransportOp::P2p: return "p2p";
    case TransportOp::Allreduce: return "allreduce";
  }
  return "?";
}

TransportsOptions parse_transports_options(const std::vector<std::string>& args) {
  TransportsOptions options;
  FlagReader in(args);
  bool iface_given = false;  // options.iface has a default (lo)
  std::string warmup;        // -w's value, read once --ops is known (p2p needs 1 or more)
  while (in.next()) {
    const std::string& flag = in.flag();
    options.iterations_given |= flag == "-n";
    if (flag == "-w") {
      options.warmup_given = true;
      warmup = in.value();
      continue;
    }
    if (parse_sweep_flag(in, options, 1'000'000)) continue;
    if (flag == "--runs") {
      options.runs = static_cast<int>(parse_int(in.value(), "--runs", 1, 100));
    } else if (flag == "--ops") {
      options.ops.clear();
      for (const auto& name : split_list(in.value(), "--ops")) {
        if (name == "p2p") options.ops.push_back(TransportOp::P2p);
        else if (name == "allreduce") options.ops.push_back(TransportOp::Allreduce);
        else throw InvalidArgument(cat("--ops: unknown operation '", name, "' (choose from p2p, allreduce)"));
      }
    } else if (flag == "--ranks") {
      options.ranks = static_cast<int>(parse_int(in.value(), "--ranks", 2, 1024));
    } else if (flag == "--repeats") {
      options.repeats = static_cast<int>(parse_int(in.value(), "--repeats", 1, 1000));
    } else if (flag == "--lanes") {
      options.lanes = parse_lane_counts(in.value());
    } else if (flag == "--iface") {
      iface_given = true;
      options.iface = in.value();
      if (options.iface.empty()) throw InvalidArgument("--iface: an interface name is needed (lo, eth0, ...)");
    } else {
      in.unknown();
    }
  }
  // As in p2p and interference: without --lanes the configurations choose their own paths, and an --iface that
  // nothing reads would leave a long run of something else looking as asked.
  if (iface_given && options.lanes.empty()) throw InvalidArgument("--iface applies only with --lanes");
  if (options.ops.empty()) options.ops = {TransportOp::P2p, TransportOp::Allreduce};
  if (std::find(options.ops.begin(), options.ops.end(), TransportOp::P2p) != options.ops.end()) {
    options.min_warmup = 1;
  }
  if (options.warmup_given) parse_warmup(warmup, options, 1'000'000);
  settle_sweep_range(options);
  return options;
}

}  // namespace pickle::bench
