#include "p2p_options.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "sizes.hpp"

namespace pickle::bench {

const char* const kP2pUsage =
    "usage: pickle bench p2p [-b 4K] [-e 1G] [-f 2] [-n 20] [-w 5] [-c 1] [--repeats 5] [--ranks N]\n"
    "                        [--backend pickle,nccl,ce] [--mode uni,bi,lat] [--json FILE] [--memory host|cuda]\n"
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
    "  --memory KIND  host or cuda (default: cuda when rank 0 sees at least 2 GPUs)\n";

std::string_view mode_name(Mode mode) noexcept {
  switch (mode) {
    case Mode::Uni: return "uni";
    case Mode::Bi: return "bi";
    case Mode::Lat: return "lat";
  }
  return "?";
}

long long parse_int(const std::string& text, const std::string& flag, long long min, long long max) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') throw InvalidArgument(cat(flag, " '", text, "': not an integer"));
  if (value < min || value > max) {
    throw InvalidArgument(cat(flag, " ", value, ": must be between ", min, " and ", max));
  }
  return value;
}

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InvalidArgument(cat(flag, " '", text, "': empty item in the list"));
    if (std::find(items.begin(), items.end(), item) != items.end()) {
      throw InvalidArgument(cat(flag, " '", text, "': '", item, "' is listed twice"));
    }
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

P2pOptions parse_p2p_options(const std::vector<std::string>& args) {
  P2pOptions options;
  bool min_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw InvalidArgument(cat(flag, " needs a value"));
      return args[++i];
    };
    if (flag == "-b") {
      options.min_bytes = parse_size(value(), "-b");
      min_given = true;
    } else if (flag == "-e") {
      options.max_bytes = parse_size(value(), "-e");
    } else if (flag == "-f") {
      options.factor = static_cast<std::size_t>(parse_int(value(), "-f", 2, 1 << 20));
    } else if (flag == "-n") {
      options.iterations = static_cast<int>(parse_int(value(), "-n", 1, 1'000'000));
    } else if (flag == "-w") {
      options.warmup = static_cast<int>(parse_int(value(), "-w", 0, 1'000'000));
    } else if (flag == "-c") {
      options.check = parse_int(value(), "-c", 0, 1) == 1;
    } else if (flag == "--repeats") {
      options.repeats = static_cast<int>(parse_int(value(), "--repeats", 1, 1000));
    } else if (flag == "--ranks") {
      options.ranks = static_cast<int>(parse_int(value(), "--ranks", 2, 1024));
    } else if (flag == "--backend") {
      options.backends = split_list(value(), "--backend");
      for (const auto& name : options.backends) {
        if (std::find(std::begin(kBackendNames), std::end(kBackendNames), name) == std::end(kBackendNames)) {
          throw InvalidArgument(cat("--backend: unknown backend '", name, "' (choose from pickle, nccl, ce)"));
        }
      }
    } else if (flag == "--mode") {
      options.modes.clear();
      for (const auto& name : split_list(value(), "--mode")) {
        if (name == "uni") options.modes.push_back(Mode::Uni);
        else if (name == "bi") options.modes.push_back(Mode::Bi);
        else if (name == "lat") options.modes.push_back(Mode::Lat);
        else throw InvalidArgument(cat("--mode: unknown mode '", name, "' (choose from uni, bi, lat)"));
      }
    } else if (flag == "--json") {
      options.json_path = value();
    } else if (flag == "--memory") {
      options.memory = value();
      if (options.memory != "host" && options.memory != "cuda") {
        throw InvalidArgument(cat("--memory '", options.memory, "': use host or cuda"));
      }
    } else if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else {
      throw InvalidArgument(cat("unknown option '", flag, "'"));
    }
  }
  if (options.backends.empty()) options.backends.assign(std::begin(kBackendNames), std::end(kBackendNames));
  if (options.modes.empty()) options.modes = {Mode::Uni, Mode::Bi, Mode::Lat};
  if (options.max_bytes != 0 && options.min_bytes > options.max_bytes) {
    if (min_given) {
      throw InvalidArgument(cat("-b ", options.min_bytes, " is larger than -e ", options.max_bytes));
    }
    options.min_bytes = options.max_bytes;  // only -e was given, below the default -b: run that one size
  }
  return options;
}

}  // namespace pickle::bench
