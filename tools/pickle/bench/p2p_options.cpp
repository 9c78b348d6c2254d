#include "p2p_options.hpp"

#include <algorithm>
#include <iterator>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

const char* const kP2pUsage =
    "usage: pickle bench p2p [-b 4K] [-e 1G] [-f 2] [-n 20] [-w 5] [-c 1] [--repeats 5] [--ranks N]\n"
    "                        [--backend pickle,nccl,ce] [--mode uni,bi,lat] [--json FILE] [--memory host|cuda]\n"
    "                        [--lanes 1,2,3,4 [--iface lo]]\n"
    "\n"
    "Point-to-point bandwidth and latency between ranks 0 and 1, for each backend in turn on the same buffers:\n"
    "  pickle  pickle::Communicator send/recv\n"
    "  nccl    ncclSend/ncclRecv (libnccl.so.2 loaded at run time; 'unavailable' without it or without GPUs)\n"
    "  ce      the raw copy-engine ceiling: stream copies into the peer's mapped buffer\n"
    "Modes: uni (rank 0 -> 1), bi (both ways at once, GB/s summed), lat (one-way latency, half a ping-pong).\n"
    "\n"
    "  -b SIZE        smallest message (4K; bytes or K/M/G/T)\n"
    "  -e SIZE        largest message (1G on GPUs, 16M on host memory; capped by free memory)\n"
    "  -f FACTOR      multiply the size by FACTOR between steps (2)\n"
    "  -n N           timed iterations per repeat (20)\n"
    "  -w N           warm-up iterations per size (5)\n"
    "  -c 0|1         check the received bytes after each size (1)\n"
    "  --repeats R    timed repeats per size; the table shows their median (5)\n"
    "  --ranks N      ranks to launch when started alone (one per GPU, or 2 host ranks); p2p uses ranks 0 and 1\n"
    "  --backend LIST comma-separated backends, run one after the other (pickle,nccl,ce)\n"
    "  --mode LIST    comma-separated modes (uni,bi,lat)\n"
    "  --json FILE    write every measurement, the environment and the topology as JSON (docs/bench.md)\n"
    "  --memory KIND  host or cuda (default: cuda when rank 0 sees at least 2 GPUs)\n"
    "  --lanes LIST   seed 001's lane comparison, pickle's net transport against NCCL's sockets at each count:\n"
    "                 hands the other flags to `pickle bench transports --ops p2p --lanes LIST` (its -b default\n"
    "                 is 64M; --backend, --mode and -c do not apply; docs/bench.md)\n"
    "  --iface NAME   the interface of both network paths with --lanes (lo)\n";

std::string_view mode_name(Mode mode) noexcept {
  switch (mode) {
    case Mode::Uni: return "uni";
    case Mode::Bi: return "bi";
    case Mode::Lat: return "lat";
  }
  return "?";
}

P2pOptions parse_p2p_options(const std::vector<std::string>& args) {
  P2pOptions options;
  options.min_warmup = 1;
  FlagReader in(args);
  while (in.next()) {
    if (parse_sweep_flag(in, options, 1'000'000)) continue;
    const std::string& flag = in.flag();
    if (flag == "-c") {
      options.check = parse_int(in.value(), "-c", 0, 1) == 1;
    } else if (flag == "--repeats") {
      options.repeats = static_cast<int>(parse_int(in.value(), "--repeats", 1, 1000));
    } else if (flag == "--ranks") {
      options.ranks = static_cast<int>(parse_int(in.value(), "--ranks", 2, 1024));
    } else if (flag == "--backend") {
      options.backends = split_list(in.value(), "--backend");
      for (const auto& name : options.backends) {
        if (std::find(std::begin(kBackendNames), std::end(kBackendNames), name) == std::end(kBackendNames)) {
          throw InvalidArgument(cat("--backend: unknown backend '", name, "' (choose from pickle, nccl, ce)"));
        }
      }
    } else if (flag == "--mode") {
      options.modes.clear();
      for (const auto& name : split_list(in.value(), "--mode")) {
        if (name == "uni") options.modes.push_back(Mode::Uni);
        else if (name == "bi") options.modes.push_back(Mode::Bi);
        else if (name == "lat") options.modes.push_back(Mode::Lat);
        else throw InvalidArgument(cat("--mode: unknown mode '", name, "' (choose from uni, bi, lat)"));
      }
    } else if (flag == "--lanes") {
      options.lanes = in.value();  // checked by run_p2p (parse_lane_counts), which hands it to the transports suite
    } else if (flag == "--iface") {
      options.iface = in.value();
    } else {
      in.unknown();
    }
  }
  if (!options.iface.empty() && options.lanes.empty()) throw InvalidArgument("--iface applies only with --lanes");
  if (!options.lanes.empty()) {
    // The comparison runs each library as child process sets of its own, one way, checked: these cannot apply.
    for (const std::string_view flag : {"--backend", "--mode", "-c"}) {
      if (std::find(args.begin(), args.end(), flag) != args.end()) {
        throw InvalidArgument(cat(flag, " does not apply with --lanes (pickle's net lanes against NCCL's sockets, "
                                        "one way, every byte checked)"));
      }
    }
  }
  if (options.backends.empty()) options.backends.assign(std::begin(kBackendNames), std::end(kBackendNames));
  if (options.modes.empty()) options.modes = {Mode::Uni, Mode::Bi, Mode::Lat};
  settle_sweep_range(options);
  return options;
}

}  // namespace pickle::bench
