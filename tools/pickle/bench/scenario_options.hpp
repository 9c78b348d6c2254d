#pragma once
// The command line of `pickle bench scenario`: seed 004's three tools, which one, and its few knobs.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pickle::bench {

/// Seed 004's tools: all_reduce_bench.py, all_gather_object_vs_all_reduce.py, all_reduce_latency_comp.py; and seed
/// 003's tensor- and pipeline-parallel overhead of LLM inference on two GPUs, measured on a layer proxy (tp-pp).
/// And seed 002's comparison of in-network aggregation (SwitchML) with NCCL, through pickle's software switch.
enum class Scenario { AllreduceBench, Flags, OneVsMany, TpPp, SwitchMl };

/// A decoder-only model's shape as tp-pp's layer proxy uses it (Llama-2's: attention and MLP projections).
struct ModelShape {
  std::string name;               ///< "llama2-7b", "llama2-13b", "tiny"
  std::size_t hidden = 0;         ///< model dimension h
  std::size_t intermediate = 0;   ///< MLP dimension i (gate and up project h -> i, down i -> h)
  int layers = 0;
};

/// The shapes --model accepts: Llama-2 7B (4096, 11008, 32 layers), 13B (5120, 13824, 40) and `tiny` (128, 256, 2),
/// the host-memory default. InvalidArgument naming the choices for any other name.
ModelShape model_shape(const std::string& name);

/// "allreduce-bench", "flags", "one-vs-many", "tp-pp", "switchml".
std::string_view scenario_name(Scenario scenario) noexcept;

struct ScenarioOptions {
  Scenario scenario = Scenario::AllreduceBench;
  std::vector<std::string> backends;  ///< --backend, in the order given (default pickle,nccl)
  int ranks = 0;                      ///< --ranks: local ranks to launch when started alone; 0: default
  std::string memory;                 ///< --memory: "host", "cuda" or "" (cuda with a GPU per local rank)
  std::string json_path;              ///< --json
  bool check = true;                  ///< -c 0|1
  bool help = false;
  /// -n: allreduce-bench's timed trials (5), flags' calls of each kind (1000), one-vs-many's repeats (3); 0 until
  /// settled to the scenario's default.
  int iterations = 0;
  /// -w: untimed calls (trials, flag rounds, repeats) first; -1 until settled (1, 10, 1).
  int warmup = -1;
  /// --bytes: allreduce-bench's payload (the seed's 4 GB = 4e9 bytes of float; 16e6 on host memory); 0: default.
  std::size_t bytes = 0;
  /// --small: one-vs-many's small allreduce (the seed's 4 MB = 4e6 bytes; 16e3 on host memory); 0: default.
  std::size_t small_bytes = 0;
  /// --count: one-vs-many's number of small allreduces; the big one is count x small (1000, as the seed).
  int count = 1000;
  /// tp-pp: the model (--model; "" until settled: llama2-7b on GPUs, tiny on host memory), --layers (0: the model's),
  /// the batch sizes (--batch, 1,8) and the prompt lengths of the prefill rows (--seq; 512,2048 on GPUs, 8,32 on host
  /// memory; empty until settled, when the memory kind is known).
  std::string model;
  int layers = 0;
  std::vector<int> batches;
  std::vector<int> seqs;
  /// switchml: int32 elements per job (--numel: the seed's --tensor-numel, 1048576 = 4 MiB; 262144 on host memory;
  /// 0 until settled).
  std::size_t numel = 0;
};

/// The seed's payloads: 500000 x 2000 floats, and a thousandth of it.
inline constexpr std::size_t kSeedPayloadBytes = 4'000'000'000;
inline constexpr std::size_t kSeedSmallBytes = 4'000'000;
inline constexpr std::size_t kScenarioHostPayloadBytes = 16'000'000;
inline constexpr std::size_t kScenarioHostSmallBytes = 16'000;

/// Parses the arguments after `scenario` (the first is the scenario's name). Unknown names and flags, bad values:
/// InvalidArgument (the caller turns them into exit code 2).
ScenarioOptions parse_scenario_options(const std::vector<std::string>& args);

/// The usage text (`pickle bench scenario --help`).
extern const char* const kScenarioUsage;

}  // namespace pickle::bench
