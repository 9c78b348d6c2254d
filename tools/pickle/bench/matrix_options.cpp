#include "matrix_options.hpp"

#include <algorithm>
#include <iterator>
#include <string_view>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "p2p_options.hpp"
#include "sizes.hpp"

namespace pickle::bench {

const char* const kMatrixUsage =
    "usage: pickle bench matrix [-b SIZE] [--backend pickle,nccl,ce] [--mode uni,bi] [--gpus N] [-n N] [-w N]\n"
    "                           [--repeats R] [--memory host|cuda] [--json FILE]\n"
    "\n"
    "The all-pairs P2P bandwidth matrix (nvbandwidth-style), pickle vs NCCL vs the copy engine: for every pair of\n"
    "devices i < j, one `pickle bench p2p --ranks 2` child with CUDA_VISIBLE_DEVICES=i,j (uni i -> j and bi i <-> j)\n"
    "and one with CUDA_VISIBLE_DEVICES=j,i (uni j -> i), one child at a time, NCCL_NVLS_ENABLE=0 in each. Rows are\n"
    "the sender, columns the receiver; bi cells are the sum of both directions (symmetric).\n"
    "\n"
    "  -b SIZE        the message size of the matrix (1G on GPUs, 16M on host memory; bytes or K/M/G/T)\n"
    "  -e SIZE        accepted only equal to -b: a matrix is one size\n"
    "  --backend LIST comma-separated backends (pickle,nccl,ce)\n"
    "  --mode LIST    comma-separated modes: uni, bi (uni,bi)\n"
    "  --gpus N       devices in the matrix, GPUs 0..N-1 (every visible GPU; on a machine without 2 GPUs, 3 devices\n"
    "                 on host memory, so that the orchestration still runs)\n"
    "  -n N, -w N     timed and warm-up iterations, forwarded to each child (default: the child's)\n"
    "  --repeats R    timed repeats in each child; its value is their median (default: the child's)\n"
    "  --memory KIND  host or cuda (default: cuda when 2 GPUs are visible); fewer than 2 GPUs on cuda: waived, exit 0\n"
    "  --json FILE    write the matrices, every child, the environment and the topology (docs/bench.md)\n";

namespace {

constexpr std::string_view kMatrixModes[] = {"uni", "bi"};

}  // namespace

std::size_t MatrixOptions::size_for(const std::string& kind) const {
  if (min_bytes != 0) return min_bytes;
  return kind == "cuda" ? kCudaDefaultMaxBytes : kHostDefaultMaxBytes;
}

bool MatrixOptions::has_mode(const std::string& mode) const {
  return std::find(modes.begin(), modes.end(), mode) != modes.end();
}

MatrixOptions parse_matrix_options(const std::vector<std::string>& args) {
  MatrixOptions options;
  options.min_warmup = 1;
  FlagReader in(args);
  while (in.next()) {
    const std::string& flag = in.flag();
    if (flag == "-f") throw InvalidArgument("-f: a matrix is one size; -b sets it");
    options.iterations_given |= flag == "-n";
    options.warmup_given |= flag == "-w";
    if (parse_sweep_flag(in, options, 1'000'000)) continue;
    if (flag == "--backend") {
      options.backends = parse_choice_list(in.value(), "--backend", kBackendNames);
    } else if (flag == "--mode") {
      options.modes = parse_choice_list(in.value(), "--mode", kMatrixModes);
    } else if (flag == "--gpus") {
      options.gpus = static_cast<int>(parse_int(in.value(), "--gpus", 2, 1024));
    } else if (flag == "--repeats") {
      options.repeats = static_cast<int>(parse_int(in.value(), "--repeats", 1, 1000));
    } else {
      in.unknown();
    }
  }
  if (options.max_bytes != 0) {
    // -e alone names the size too; with -b it may only repeat it.
    if (options.min_given && options.max_bytes != options.min_bytes) {
      throw InvalidArgument(cat("-e ", short_size(options.max_bytes), ": a matrix is one size (-b ",
                                short_size(options.min_bytes), "); leave -e out or give it equal to -b"));
    }
    options.min_bytes = options.max_bytes;
  }
  if (options.backends.empty()) options.backends.assign(std::begin(kBackendNames), std::end(kBackendNames));
  if (options.modes.empty()) options.modes.assign(std::begin(kMatrixModes), std::end(kMatrixModes));
  return options;
}

}  // namespace pickle::bench
