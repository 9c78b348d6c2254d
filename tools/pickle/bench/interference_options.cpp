#include "interference_options.hpp"

#include <algorithm>
#include <iterator>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "transports_configs.hpp"

namespace pickle::bench {

const char* const kInterferenceUsage =
    "usage: pickle bench interference [-b 4K] [-e 16G] [-f 4] [-n 100] [-w 20] [--warmup-ms 1000] [-c 1] [--depth 8]\n"
    "                                 [--ranks N] [--share-gpus] [--foreground gemm,attention]\n"
    "                                 [--attention auto|cudnn|own] [--backend pickle,nccl] [--background p2p]\n"
    "                                 [--json FILE] [--lanes 1,2,4 [--iface lo]]\n"
    "\n"
    "How much background traffic slows compute on the GPUs it runs on. A foreground kernel runs alone, then while the\n"
    "background moves data continuously; relative throughput = time alone / time with traffic (1 = no effect).\n"
    "Foregrounds:\n"
    "  gemm       cuBLASLt bf16 8192x8192x8192, fp32 accumulate, the fastest of cuBLASLt's heuristic candidates\n"
    "             (libcublasLt loaded at run time)\n"
    "  attention  bf16 forward, batch 8, heads 64, seq 4096, head dim 128, not causal: cuDNN SDPA (libcudnn.so.9\n"
    "             loaded at run time) or pickle fused attention (own kernel), as --attention says\n"
    "Backends of the background traffic:\n"
    "  pickle     pickle::Communicator send/recv (copy engine, no kernel) and allgather\n"
    "  nccl       ncclSend/ncclRecv and ncclAllGather (libnccl.so.2 loaded at run time)\n"
    "  ce         the raw copy engine: cudaMemcpyAsync into the peer's mapped memory and a flag, p2p only: the\n"
    "             ceiling pickle's copies are held to (not run unless asked for: --backend pickle,nccl,ce)\n"
    "Backgrounds:\n"
    "  p2p        rank 0 sends messages of each size to rank 1, which runs the foreground\n"
    "  allgather  ranks 0..N-1 (N: --ranks, else every rank) gather each size, the gathered total (size/N from each\n"
    "             rank); every one of them runs the foreground, and a row's relative throughput is the mean over\n"
    "             them. Not run unless asked for. Seed 001's 8 GPUs x 1 GB: --ranks 8 -b 8G -e 8G\n"
    "Needs a GPU for each rank taking part (2 for p2p, N for allgather): with fewer it says it is waived and exits 0.\n"
    "\n"
    "  -b SIZE           smallest background message (4K; bytes or K/M/G/T)\n"
    "  -e SIZE           largest background message (16G; capped by free GPU memory, with a note)\n"
    "  -f FACTOR         multiply the message size by FACTOR between rows (4)\n"
    "  -n N              timed foreground iterations per measurement (100)\n"
    "  -w N              untimed foreground iterations before each measurement (20)\n"
    "  --warmup-ms MS    ... and at least this long, so that the GPU's clocks settle under the load (1000)\n"
    "  -c 0|1            check the background's received bytes and the foreground's result (1)\n"
    "  --depth D         background messages kept in flight, so that the link never idles (8)\n"
    "  --ranks N         ranks to launch when started alone (one per GPU), and the allgather's ranks (at most the\n"
    "                    job's); p2p uses ranks 0 and 1\n"
    "  --share-gpus      run even where ranks must share a GPU (rank r on GPU r mod GPUs): a functional check, not\n"
    "                    interference figures (said in the output); NCCL is then unavailable\n"
    "  --foreground LIST comma-separated foregrounds (gemm,attention)\n"
    "  --attention IMPL  auto: cuDNN SDPA where libcudnn.so.9 loads and supports the graph, else the own kernel;\n"
    "                    cudnn: cuDNN SDPA or fail saying why; own: pickle's own kernel (auto)\n"
    "  --backend LIST    comma-separated backends, run one after the other: pickle, nccl, ce (pickle,nccl)\n"
    "  --background LIST comma-separated traffic patterns: p2p, allgather (p2p)\n"
    "  --json FILE       write every measurement, the environment and the topology as JSON (docs/bench.md)\n"
    "  --lanes LIST      seed 001's network interference: for each lane count L and each --backend, one child\n"
    "                    `pickle bench interference --background p2p` forced onto its library's network path over\n"
    "                    --iface (NCCL: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket, L socket threads of\n"
    "                    one socket each, one channel per peer; pickle: PICKLE_TRANSPORT=net, L lanes); one merged\n"
    "                    table and --json file\n"
    "  --iface NAME      the interface of both network paths with --lanes (lo)\n";

InterferenceOptions parse_interference_options(const std::vector<std::string>& args) {
  InterferenceOptions options;
  bool iface_given = false;
  FlagReader in(args);
  while (in.next()) {
    const std::string& flag = in.flag();
    if (flag == "--memory") {
      // The shared flag makes no sense here: the suite measures GPUs, and only GPUs.
      throw InvalidArgument("--memory: interference always runs on GPU memory; leave the flag out");
    }
    if (parse_sweep_flag(in, options, 1'000'000)) continue;
    if (flag == "-c") {
      options.check = parse_int(in.value(), "-c", 0, 1) == 1;
    } else if (flag == "--warmup-ms") {
      options.warmup_ms = static_cast<int>(parse_int(in.value(), "--warmup-ms", 0, 60'000));
    } else if (flag == "--depth") {
      options.depth = static_cast<int>(parse_int(in.value(), "--depth", 1, 1024));
    } else if (flag == "--ranks") {
      options.ranks = static_cast<int>(parse_int(in.value(), "--ranks", 2, 1024));
    } else if (flag == "--share-gpus") {
      options.share_gpus = true;
    } else if (flag == "--foreground") {
      options.foregrounds = parse_choice_list(in.value(), "--foreground", kForegroundNames);
    } else if (flag == "--attention") {
      options.attention = parse_attention_impl(in.value());
    } else if (flag == "--backend") {
      options.backends = parse_choice_list(in.value(), "--backend", kInterferenceBackendNames);
    } else if (flag == "--background") {
      options.backgrounds = parse_choice_list(in.value(), "--background", kBackgroundNames);
    } else if (flag == "--lanes") {
      options.lanes = parse_lane_counts(in.value());
    } else if (flag == "--iface") {
      options.iface = in.value();
      iface_given = true;
      if (options.iface.empty()) throw InvalidArgument("--iface: an interface name is needed (lo, eth0, ...)");
    } else {
      in.unknown();
    }
  }
  if (options.foregrounds.empty()) {
    options.foregrounds.assign(std::begin(kForegroundNames), std::end(kForegroundNames));
  }
  if (options.backends.empty()) {
    options.backends.assign(std::begin(kInterferenceDefaultBackends), std::end(kInterferenceDefaultBackends));
  }
  if (options.backgrounds.empty()) options.backgrounds = {"p2p"};
  if (iface_given && options.lanes.empty()) {
    throw InvalidArgument("--iface: only with --lanes (the interface of the network paths it forces)");
  }
  if (!options.lanes.empty() && options.backgrounds != std::vector<std::string>{"p2p"}) {
    // Seed 001 item 4 is rank 0 -> rank 1 over the network; an allgather would put N ranks on loopback at once and
    // measure the host's CPU rather than the lanes.
    throw InvalidArgument("--lanes: only with --background p2p (the seed's network interference is point to point)");
  }
  const bool ce = std::find(options.backends.begin(), options.backends.end(), "ce") != options.backends.end();
  if (!options.lanes.empty() && ce) {
    // Lanes are a network path's; the copy engine writes into the peer's mapped memory on this host, over none.
    throw InvalidArgument("--lanes: the ce backend has no network path and no lanes (it copies into the peer's "
                          "mapped memory on this host); leave it out of --backend");
  }
  settle_sweep_range(options);
  return options;
}

}  // namespace pickle::bench
