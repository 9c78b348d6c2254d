#include "scenario_options.hpp"

#include <algorithm>

#include <pickle/error.hpp>

#include "coll_options.hpp"
#include "core/format.hpp"
#include "sizes.hpp"
#include "sweep_options.hpp"

namespace pickle::bench {

const char* const kScenarioUsage =
    "usage: pickle bench scenario allreduce-bench|flags|one-vs-many|tp-pp|switchml [--backend pickle,nccl]\n"
    "                             [--ranks N] [-n N] [-w N] [-c 0|1] [--bytes SIZE] [--small SIZE] [--count N]\n"
    "                             [--model NAME] [--layers N] [--batch LIST] [--seq LIST] [--numel N]\n"
    "                             [--json FILE] [--memory host|cuda]\n"
    "\n"
    "Seed 004's three tools, seed 003's tp-pp and seed 002's switchml, for each backend in turn:\n"
    "  allreduce-bench  one in-place float allreduce of a 4 GB payload per trial (all_reduce_bench.py): algbw and\n"
    "                   busbw in GB/s and Gbps, per trial and on average\n"
    "  flags            1000 gathers of a small serialized object (a length allgather, then the bytes, as\n"
    "                   torch's all_gather_object) vs 1000 one-element allreduces, each read back: the ratio\n"
    "  one-vs-many      one allreduce of 4 GB vs 1000 allreduces of 4 MB (all_reduce_latency_comp.py)\n"
    "  tp-pp            seed 003 on two ranks: a Llama-2 forward pass (its layers' four projections, bf16) on one\n"
    "                   GPU, split by tensor parallelism (TP=2: an allreduce after the attention output and the\n"
    "                   MLP down projection) and by pipeline parallelism (PP=2: the activations sent to the second\n"
    "                   stage, its tokens back), for prefill (batch x seq tokens) and decode (batch tokens)\n"
    "  switchml         seed 002: in-network aggregation as SwitchML does it, by pickle's software switch (a thread\n"
    "                   of rank 0, UDP; backend `switch`), against pickle's and NCCL's allreduce: -n jobs of one\n"
    "                   int32 sum of --numel elements, Duration and Goodput per job, min/max/median/mean/stddev\n"
    "Every scenario checks its results (#wrong must be 0) unless -c 0.\n"
    "\n"
    "  -n N           allreduce-bench: timed trials (5); flags: calls of each kind (1000); one-vs-many: repeats (3);\n"
    "                 tp-pp: timed passes per configuration (5); switchml: jobs (10)\n"
    "  -w N           untimed rounds first (allreduce-bench 1, flags 10, one-vs-many 1, tp-pp 1, switchml 5)\n"
    "  -c 0|1         check the results (1)\n"
    "  --bytes SIZE   allreduce-bench's payload (4000000000 on GPUs, 16000000 on host memory; capped by memory)\n"
    "  --small SIZE   one-vs-many's small allreduce (4000000 on GPUs, 16000 on host memory)\n"
    "  --count N      one-vs-many's number of small allreduces; the big one is N x --small (1000)\n"
    "  --model NAME   tp-pp's shape: llama2-7b, llama2-13b or tiny (llama2-7b on GPUs, tiny on host memory)\n"
    "  --layers N     tp-pp's layers (default: the model's; even, for the two pipeline stages)\n"
    "  --batch LIST   tp-pp's batch sizes (1,8)\n"
    "  --seq LIST     tp-pp's prompt lengths for the prefill rows (512,2048 on GPUs, 8,32 on host memory)\n"
    "  --numel N      switchml's int32 elements per job (1048576 on GPUs as the seed, 262144 on host memory)\n"
    "  --ranks N      ranks to launch when started alone (one per GPU, or 2 host ranks; tp-pp: always 2)\n"
    "  --backend LIST comma-separated backends, run one after the other (pickle,nccl; switchml: switch,pickle,nccl)\n"
    "  --json FILE    write the results, the environment and the topology as JSON (docs/bench.md)\n"
    "  --memory KIND  host or cuda (default: cuda when rank 0's host has a GPU per local rank)\n";

std::string_view scenario_name(Scenario scenario) noexcept {
  switch (scenario) {
    case Scenario::AllreduceBench:
      return "allreduce-bench";
    case Scenario::Flags:
      return "flags";
    case Scenario::OneVsMany:
      return "one-vs-many";
    case Scenario::TpPp:
      return "tp-pp";
    case Scenario::SwitchMl:
      return "switchml";
  }
  return "?";
}

ModelShape model_shape(const std::string& name) {
  if (name == "llama2-7b") return {.name = name, .hidden = 4096, .intermediate = 11008, .layers = 32};
  if (name == "llama2-13b") return {.name = name, .hidden = 5120, .intermediate = 13824, .layers = 40};
  if (name == "tiny") return {.name = name, .hidden = 128, .intermediate = 256, .layers = 2};
  throw InvalidArgument(cat("--model: unknown model '", name, "' (choose from llama2-7b, llama2-13b, tiny)"));
}

namespace {

/// "1,8" -> {1, 8}: positive integers up to `max`, as split_list splits them.
std::vector<int> parse_int_list(const std::string& text, const std::string& flag, int max) {
  std::vector<int> values;
  for (const auto& item : split_list(text, flag)) values.push_back(static_cast<int>(parse_int(item, flag, 1, max)));
  return values;
}

}  // namespace

ScenarioOptions parse_scenario_options(const std::vector<std::string>& args) {
  ScenarioOptions options;
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    options.help = true;
    return options;
  }
  if (args.empty() || args[0].starts_with("-")) {
    throw InvalidArgument("name a scenario: allreduce-bench, flags, one-vs-many, tp-pp or switchml");
  }
  constexpr Scenario kAll[] = {Scenario::AllreduceBench, Scenario::Flags, Scenario::OneVsMany, Scenario::TpPp,
                               Scenario::SwitchMl};
  auto found = std::find_if(std::begin(kAll), std::end(kAll), [&](Scenario s) { return scenario_name(s) == args[0]; });
  if (found == std::end(kAll)) {
    throw InvalidArgument(
        cat("unknown scenario '", args[0], "' (choose from allreduce-bench, flags, one-vs-many, tp-pp, switchml)"));
  }
  options.scenario = *found;
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  FlagReader in(rest);
  while (in.next()) {
    const std::string& flag = in.flag();
    if (flag == "-n") {
      options.iterations = static_cast<int>(parse_int(in.value(), "-n", 1, 1'000'000));
    } else if (flag == "-w") {
      options.warmup = static_cast<int>(parse_int(in.value(), "-w", 0, 1'000'000));
    } else if (flag == "-c") {
      options.check = parse_int(in.value(), "-c", 0, 1) == 1;
    } else if (flag == "--bytes") {
      options.bytes = parse_size(in.value(), "--bytes");
    } else if (flag == "--small") {
      options.small_bytes = parse_size(in.value(), "--small");
    } else if (flag == "--count") {
      options.count = static_cast<int>(parse_int(in.value(), "--count", 1, 1'000'000));
    } else if (flag == "--model") {
      options.model = model_shape(in.value()).name;
    } else if (flag == "--layers") {
      options.layers = static_cast<int>(parse_int(in.value(), "--layers", 2, 1000));
    } else if (flag == "--batch") {
      options.batches = parse_int_list(in.value(), "--batch", 4096);
    } else if (flag == "--seq") {
      options.seqs = parse_int_list(in.value(), "--seq", 1 << 20);
    } else if (flag == "--numel") {
      options.numel = static_cast<std::size_t>(parse_int(in.value(), "--numel", 1, 1LL << 31));
    } else if (flag == "--ranks") {
      options.ranks = static_cast<int>(parse_int(in.value(), "--ranks", 1, 1024));
    } else if (flag == "--backend") {
      if (options.scenario == Scenario::SwitchMl) {
        options.backends = parse_coll_backends(in.value(), "--backend", kSwitchMlBackendNames);
      } else {
        options.backends = parse_coll_backends(in.value(), "--backend", kScenarioBackendNames);
      }
    } else if (flag == "--memory") {
      options.memory = in.value();
      if (options.memory != "host" && options.memory != "cuda") {
        throw InvalidArgument(cat("--memory '", options.memory, "': use host or cuda"));
      }
    } else if (flag == "--json") {
      options.json_path = in.file_value();
    } else if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else {
      in.unknown();
    }
  }
  if (options.backends.empty() && options.scenario == Scenario::SwitchMl) {
    options.backends.assign(std::begin(kSwitchMlBackendNames), std::end(kSwitchMlBackendNames));
  } else if (options.backends.empty()) {
    options.backends.assign(std::begin(kScenarioBackendNames), std::end(kScenarioBackendNames));
  }
  const bool bench = options.scenario == Scenario::AllreduceBench, flags = options.scenario == Scenario::Flags;
  const bool tp_pp = options.scenario == Scenario::TpPp, switchml = options.scenario == Scenario::SwitchMl;
  if (options.iterations == 0) options.iterations = bench || tp_pp ? 5 : flags ? 1000 : switchml ? 10 : 3;
  if (options.warmup < 0) options.warmup = flags ? 10 : switchml ? 5 : 1;  // switchml: the seed's 5 and 10 jobs
  if (options.numel != 0 && !switchml) throw InvalidArgument("--numel applies to switchml only");
  if ((options.bytes != 0 && options.bytes < sizeof(float)) ||
      (options.small_bytes != 0 && options.small_bytes < sizeof(float))) {
    throw InvalidArgument("--bytes and --small must hold at least one float (4 bytes)");
  }
  if (options.bytes != 0 && !bench) throw InvalidArgument("--bytes applies to allreduce-bench only");
  if ((options.small_bytes != 0 || options.count != 1000) && options.scenario != Scenario::OneVsMany) {
    throw InvalidArgument("--small and --count apply to one-vs-many only");
  }
  if ((!options.model.empty() || options.layers != 0 || !options.batches.empty() || !options.seqs.empty()) && !tp_pp) {
    throw InvalidArgument("--model, --layers, --batch and --seq apply to tp-pp only");
  }
  if (tp_pp && options.ranks != 0 && options.ranks != 2) {
    throw InvalidArgument(cat("--ranks ", options.ranks, ": tp-pp runs on 2 ranks (TP=2, PP=2)"));
  }
  if (options.layers % 2 != 0) {
    throw InvalidArgument(cat("--layers ", options.layers, ": give an even number (two pipeline stages of as many)"));
  }
  if (options.batches.empty()) options.batches = {1, 8};
  return options;
}

}  // namespace pickle::bench
