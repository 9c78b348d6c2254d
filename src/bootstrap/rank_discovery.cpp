// Rank discovery: reads the variables that launchers set (through env::foreign, the one place that reads the
// environment) and checks them, so that a wrong launch fails at once with the variable's name instead of as a
// store that never fills.

#include "bootstrap/rank_discovery.hpp"

#include <charconv>
#include <climits>
#include <optional>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "bootstrap/token.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle {
namespace bootstrap {
namespace {

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::optional<int> optional_int(const char* variable, int min, int max) {
  auto value = env::foreign(variable);
  if (!value) return std::nullopt;
  return parse_int_var(variable, *value, min, max);
}

int required_int(const char* variable, int min, int max, std::string_view why) {
  auto value = optional_int(variable, min, max);
  if (!value) throw InvalidArgument(cat(variable, " is not set (", why, ")"));
  return *value;
}

/// The first of several variables that is set, with its name.
std::optional<std::pair<const char*, std::string>> first_set(std::initializer_list<const char*> variables) {
  for (const char* name : variables) {
    if (auto value = env::foreign(name)) return std::make_pair(name, *value);
  }
  return std::nullopt;
}

/// Names of the variables one launcher uses for the four numbers, for error messages.
struct LayoutNames {
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
};

void check_layout(const RankInfo& info, const LayoutNames& names) {
  if (info.rank >= info.world_size) {
    throw InvalidArgument(cat(names.rank, "=", info.rank, " is not below ", names.world, "=", info.world_size));
  }
  if (info.local_world_size > info.world_size) {
    throw InvalidArgument(
        cat(names.local_world, "=", info.local_world_size, " is larger than ", names.world, "=", info.world_size));
  }
  if (info.local_rank >= info.local_world_size) {
    throw InvalidArgument(cat(names.local_rank, "=", info.local_rank, " is not below ", names.local_world, "=",
                              info.local_world_size));
  }
}

/// MASTER_PORT if set; else the port derived from the job id; a world of one may do without (any free port).
int master_port_or_derived(const RankInfo& info, std::string_view launcher) {
  if (auto port = optional_int("MASTER_PORT", 1, 65535)) return *port;
  if (!info.job_id.empty()) return port_from_job_id(info.job_id);
  if (info.world_size == 1) return 0;
  throw InvalidArgument(cat("MASTER_PORT is not set and the ", launcher,
                            " environment has no job id to derive a port from: set MASTER_PORT to a free port on "
                            "rank 0's host"));
}

RankInfo from_torchrun() {
  RankInfo info;
  info.source = "torchrun";
  info.world_size = required_int("WORLD_SIZE", 1, INT_MAX, "RANK is set, so torchrun's variables are expected");
  info.rank = required_int("RANK", 0, INT_MAX, "");
  info.local_world_size = optional_int("LOCAL_WORLD_SIZE", 1, INT_MAX).value_or(info.world_size);
  info.local_rank = optional_int("LOCAL_RANK", 0, INT_MAX).value_or(info.rank % info.local_world_size);
  check_layout(info, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"});
  info.job_id = env::foreign("TORCHELASTIC_RUN_ID").value_or("");
  if (auto addr = env::foreign("MASTER_ADDR")) {
    info.master_addr = *addr;
  } else if (info.local_world_size != info.world_size) {
    throw InvalidArgument("MASTER_ADDR is not set and the job spans several hosts (LOCAL_WORLD_SIZE < WORLD_SIZE)");
  }
  if (auto port = optional_int("MASTER_PORT", 1, 65535)) {
    info.master_port = *port;
  } else if (info.world_size > 1) {
    throw InvalidArgument("MASTER_PORT is not set (torchrun sets it: rank 0's store listens there)");
  }
  return info;
}

RankInfo from_openmpi() {
  RankInfo info;
  info.source = "openmpi";
  info.world_size = required_int("OMPI_COMM_WORLD_SIZE", 1, INT_MAX, "OMPI_COMM_WORLD_RANK is set");
  info.rank = required_int("OMPI_COMM_WORLD_RANK", 0, INT_MAX, "");
  info.local_world_size = optional_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT_MAX).value_or(info.world_size);
  info.local_rank =
      optional_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX).value_or(info.rank % info.local_world_size);
  check_layout(info, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                      "OMPI_COMM_WORLD_LOCAL_SIZE"});
  if (auto job = first_set({"OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})) {
    info.job_id = job->second;
  }
  if (auto addr = env::foreign("MASTER_ADDR")) {
    info.master_addr = *addr;
  } else if (info.local_world_size != info.world_size) {
    throw InvalidArgument(cat("MASTER_ADDR is not set and the Open MPI job spans several hosts (OMPI_COMM_WORLD_LOCAL_SIZE=",
                              info.local_world_size, " of OMPI_COMM_WORLD_SIZE=", info.world_size,
                              "): set MASTER_ADDR to rank 0's host"));
  }
  info.master_port = master_port_or_derived(info, "Open MPI");
  return info;
}

RankInfo from_slurm() {
  RankInfo info;
  info.source = "slurm";
  auto ntasks = first_set({"SLURM_NTASKS", "SLURM_NPROCS"});
  if (!ntasks) throw InvalidArgument("SLURM_NTASKS is not set (SLURM_PROCID is, so an srun step is expected)");
  info.world_size = parse_int_var(ntasks->first, ntasks->second, 1, INT_MAX);
  info.rank = required_int("SLURM_PROCID", 0, INT_MAX, "");
  info.local_rank = required_int("SLURM_LOCALID", 0, INT_MAX, "srun sets it for every task");

  const char* local_world_var = "SLURM_NTASKS_PER_NODE";
  if (auto per_node = optional_int("SLURM_NTASKS_PER_NODE", 1, INT_MAX)) {
    info.local_world_size = *per_node;
  } else if (auto list = first_set({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
    local_world_var = list->first;
    std::vector<int> counts = parse_slurm_tasks_per_node(list->second, list->first);
    const int node = optional_int("SLURM_NODEID", 0, INT_MAX).value_or(0);
    if (static_cast<std::size_t>(node) >= counts.size()) {
      throw InvalidArgument(cat("SLURM_NODEID=", node, " is beyond the ", counts.size(), " nodes of ", list->first,
                                "='", list->second, "'"));
    }
    info.local_world_size = counts[static_cast<std::size_t>(node)];
  } else {
    throw InvalidArgument("SLURM_TASKS_PER_NODE is not set (srun sets it; or set SLURM_NTASKS_PER_NODE)");
  }
  check_layout(info, {"SLURM_PROCID", ntasks->first, "SLURM_LOCALID", local_world_var});

  if (auto job = first_set({"SLURM_JOB_ID", "SLURM_JOBID"})) {
    info.job_id = job->second;
    if (auto step = first_set({"SLURM_STEP_ID", "SLURM_STEPID"})) info.job_id += "." + step->second;
  }
  if (auto addr = env::foreign("MASTER_ADDR")) {
    info.master_addr = *addr;
  } else if (auto list = first_set({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
    // Task 0 runs on the step's first node under srun's default (block) distribution.
    info.master_addr = expand_slurm_nodelist(list->second, list->first).front();
  } else if (info.world_size > 1) {
    throw InvalidArgument("MASTER_ADDR is not set and neither is SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST)");
  }
  info.master_port = master_port_or_derived(info, "Slurm");
  return info;
}

/// Appends the expansions of one host expression (no top-level commas) to out.
void expand_host(std::string_view expr, std::string_view whole, std::string_view variable, std::size_t max_hosts,
                 std::vector<std::string>& out) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(cat(variable, "='", whole, "' is not a Slurm host list: ", why));
  };
  const std::size_t open = expr.find('[');
  if (open == std::string_view::npos) {
    if (expr.find(']') != std::string_view::npos) throw bad("']' without '['");
    if (expr.empty()) throw bad("empty host name");
    if (out.size() >= max_hosts) throw bad(cat("more than ", max_hosts, " hosts"));
    out.emplace_back(expr);
    return;
  }
  const std::size_t close = expr.find(']', open);
  if (close == std::string_view::npos) throw bad("'[' without ']'");
  const std::string_view prefix = expr.substr(0, open);
  const std::string_view body = expr.substr(open + 1, close - open - 1);
  if (prefix.find(']') != std::string_view::npos) throw bad("']' without '['");
  if (body.empty()) throw bad("empty brackets");
  // What follows the brackets may hold more brackets ("rack[1-2]-gpu[1-4]"): expand it once, then combine.
  const std::string_view rest = expr.substr(close + 1);
  std::vector<std::string> tails;
  if (rest.empty()) {
    tails.emplace_back();
  } else {
    expand_host(rest, whole, variable, max_hosts, tails);
  }
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    const std::string_view part = body.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    const std::string_view lo_text = part.substr(0, dash);
    const std::string_view hi_text = dash == std::string_view::npos ? lo_text : part.substr(dash + 1);
    // Nine digits keep the numbers inside an unsigned long long with room to spare.
    if (!all_digits(lo_text) || !all_digits(hi_text) || lo_text.size() > 9 || hi_text.size() > 9) {
      throw bad(cat("'", part, "' is not a number or a range of numbers"));
    }
    unsigned long long lo = 0, hi = 0;
    std::from_chars(lo_text.data(), lo_text.data() + lo_text.size(), lo);
    std::from_chars(hi_text.data(), hi_text.data() + hi_text.size(), hi);
    if (lo > hi) throw bad(cat("range '", part, "' runs backwards"));
    for (unsigned long long n = lo; n <= hi; ++n) {
      std::string number = std::to_string(n);
      // Slurm keeps the zero padding of the range's first number: node[01-10] -> node01 .. node10.
      if (number.size() < lo_text.size()) number.insert(0, lo_text.size() - number.size(), '0');
      for (const auto& tail : tails) {
        if (out.size() >= max_hosts) throw bad(cat("more than ", max_hosts, " hosts"));
        out.push_back(cat(prefix, number, tail));
      }
    }
    start = comma + 1;
  }
}

}  // namespace

int parse_int_var(std::string_view variable, std::string_view value, int min, int max) {
  long long parsed = 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  auto [end, error] = std::from_chars(first, last, parsed);
  if (value.empty() || error != std::errc() || end != last) {
    throw InvalidArgument(cat(variable, "='", value, "' is not an integer"));
  }
  if (parsed < min || parsed > max) {
    throw InvalidArgument(cat(variable, "=", parsed, " is out of range (", min, " to ", max, ")"));
  }
  return static_cast<int>(parsed);
}

std::vector<std::string> expand_slurm_nodelist(std::string_view list, std::string_view variable,
                                               std::size_t max_hosts) {
  std::vector<std::string> hosts;
  // Split at commas outside brackets: "a[1,3],b" is the two expressions "a[1,3]" and "b".
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0 || depth > 1) {
      throw InvalidArgument(cat(variable, "='", list, "' is not a Slurm host list: unbalanced brackets"));
    }
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      expand_host(list.substr(start, i - start), list, variable, max_hosts, hosts);
      start = i + 1;
    }
  }
  if (depth != 0) throw InvalidArgument(cat(variable, "='", list, "' is not a Slurm host list: '[' without ']'"));
  return hosts;
}

std::vector<int> parse_slurm_tasks_per_node(std::string_view value, std::string_view variable) {
  constexpr std::size_t kMaxNodes = 1 << 20;
  auto bad = [&] { return InvalidArgument(cat(variable, "='", value, "' is not of the form 2(x3),1")); };
  std::vector<int> counts;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view item = value.substr(start, comma - start);
    std::size_t repeat = 1;
    if (const std::size_t paren = item.find('('); paren != std::string_view::npos) {
      if (item.size() < paren + 4 || item.substr(paren, 2) != "(x" || item.back() != ')') throw bad();
      std::string_view times = item.substr(paren + 2, item.size() - paren - 3);
      if (!all_digits(times) || times.size() > 7) throw bad();
      repeat = static_cast<std::size_t>(parse_int_var(variable, times, 1, INT_MAX));
      item = item.substr(0, paren);
    }
    if (!all_digits(item)) throw bad();
    const int count = parse_int_var(variable, item, 1, INT_MAX);
    if (counts.size() + repeat > kMaxNodes) throw bad();
    counts.insert(counts.end(), repeat, count);
    start = comma + 1;
  }
  return counts;
}

int port_from_job_id(std::string_view job_id) {
  return 20000 + static_cast<int>(fnv1a64(cat("pickle-port|", job_id)) % 10000);
}

}  // namespace bootstrap

RankInfo discover_rank_info() {
  RankInfo info;
  // torchrun first: it may run inside an Open MPI or Slurm allocation and sets per-process RANK itself.
  // Open MPI before Slurm: mpirun inside an sbatch script inherits the batch step's SLURM_PROCID=0 in every rank.
  if (env::foreign("RANK")) {
    info = bootstrap::from_torchrun();
  } else if (env::foreign("OMPI_COMM_WORLD_RANK")) {
    info = bootstrap::from_openmpi();
  } else if (env::foreign("SLURM_PROCID")) {
    info = bootstrap::from_slurm();
  } else {
    info.source = "single";
  }
  PICKLE_LOG(Info, "bootstrap",
             "rank " << info.rank << " of " << info.world_size << " (local " << info.local_rank << " of "
                     << info.local_world_size << ") from " << info.source << ", store at " << info.master_addr << ":"
                     << info.master_port);
  return info;
}

}  // namespace pickle
