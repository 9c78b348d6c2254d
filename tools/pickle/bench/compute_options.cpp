#include "compute_options.hpp"

#include <exception>
#include <iterator>
#include <string>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {

const char* const kComputeUsage =
    "usage: pickle bench compute [-n 20] [-w 5] [-r 5] [--warmup-ms 1000] [--device 0]\n"
    "                            [--foreground gemm,attention] [--attention auto|cudnn|own] [--copy-load GBPS]\n"
    "                            [--json FILE]\n"
    "\n"
    "The foregrounds of `pickle bench interference`, timed alone on one GPU: no ranks, no traffic. For each: ms per\n"
    "iteration (CUDA events around -n iterations, median of -r repeats), TFLOP/s, and its check (against a simple\n"
    "reference kernel, and every output element compared with its first result after the repeats).\n"
    "Foregrounds:\n"
    "  gemm       cuBLASLt bf16 8192x8192x8192, fp32 accumulate, the fastest of cuBLASLt's heuristic candidates\n"
    "  attention  bf16 forward, batch 8, heads 64, seq 4096, head dim 128, not causal: cuDNN SDPA\n"
    "             or pickle fused attention (own kernel), as --attention says\n"
    "Needs a CUDA GPU: on a machine without one it says it is waived and exits 0.\n"
    "\n"
    "  -n N              iterations per timed repeat (20)\n"
    "  -w N              untimed iterations before the first repeat (5)\n"
    "  --warmup-ms MS    ... and at least this long, so that the GPU's clocks settle under the load (1000)\n"
    "  -r N              timed repeats; the median is reported, with the min and max (5)\n"
    "  --device N        the CUDA device to run on (0)\n"
    "  --foreground LIST comma-separated foregrounds (gemm,attention)\n"
    "  --attention IMPL  auto: cuDNN SDPA where libcudnn.so.9 loads and supports the graph, else the own kernel;\n"
    "                    cudnn: cuDNN SDPA or fail saying why; own: pickle's own kernel (auto)\n"
    "  --copy-load GBPS  also time each foreground beside device-to-device copies inside the same GPU, asked at\n"
    "                    this many GB/s (64 MiB copies on a stream of their own; the rate reached is reported); the\n"
    "                    repeats alone then come half before and half after the loaded ones\n"
    "  --json FILE       write the results, the environment and the topology as JSON (docs/bench.md)\n";

namespace {

/// A rate in GB/s: a number above 0 and at most 100000.
double parse_rate(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(value > 0) || value > 1e5) {
    throw InvalidArgument(cat(flag, " '", text, "': expected GB/s, a number above 0 and at most 100000"));
  }
  return value;
}

}  // namespace

ComputeOptions parse_compute_options(const std::vector<std::string>& args) {
  ComputeOptions options;
  FlagReader in(args);
  while (in.next()) {
    const std::string& flag = in.flag();
    if (flag == "-n") {
      options.iterations = static_cast<int>(parse_int(in.value(), "-n", 1, 1'000'000));
    } else if (flag == "-w") {
      options.warmup = static_cast<int>(parse_int(in.value(), "-w", 0, 1'000'000));
    } else if (flag == "-r") {
      options.repeats = static_cast<int>(parse_int(in.value(), "-r", 1, 1000));
    } else if (flag == "--warmup-ms") {
      options.warmup_ms = static_cast<int>(parse_int(in.value(), "--warmup-ms", 0, 60'000));
    } else if (flag == "--device") {
      options.device = static_cast<int>(parse_int(in.value(), "--device", 0, 1023));
    } else if (flag == "--foreground") {
      options.foregrounds = parse_choice_list(in.value(), "--foreground", kForegroundNames);
    } else if (flag == "--attention") {
      options.attention = parse_attention_impl(in.value());
    } else if (flag == "--copy-load") {
      options.copy_load_gbps = parse_rate(in.value(), "--copy-load");
    } else if (flag == "--json") {
      options.json_path = in.file_value();
    } else if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else {
      in.unknown();
    }
  }
  if (options.foregrounds.empty()) {
    options.foregrounds.assign(std::begin(kForegroundNames), std::end(kForegroundNames));
  }
  return options;
}

}  // namespace pickle::bench
