#include "coll_options.hpp"

#include <algorithm>
#include <iterator>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::bench {

const char* const kCollUsage =
    "usage: pickle bench coll [-c allreduce,...|all] [-b 4K] [-e 1G] [-f 2] [-n 20] [-w 5] [-c 0|1] [-d float]\n"
    "                         [-o sum] [-r 0] [--repeats 5] [--ranks N] [--backend pickle,nccl,nccl-zero]\n"
    "                         [--json FILE]\n"
    "                         [--memory host|cuda]\n"
    "\n"
    "Collective bandwidth the nccl-tests way, for each backend in turn on the same buffers and sizes:\n"
    "  pickle  pickle::Communicator's collectives (copy engines; reductions on a few CTAs)\n"
    "  nccl    ncclAllReduce, ncclAllGather, ... (libnccl.so.2 loaded at run time; 'unavailable' without it or\n"
    "          without GPUs)\n"
    "Every size runs out-of-place, then in-place; each reports time, algbw, busbw (nccl-tests' factors) and #wrong.\n"
    "\n"
    "  -c LIST        collectives: allreduce, allgather, broadcast, alltoall, reduce_scatter, a comma list, or all\n"
    "                 (allreduce); also --coll LIST\n"
    "  -c 0|1         check the results after each size (1); also --check 0|1\n"
    "  -b SIZE        smallest size (4K; bytes or K/M/G/T): the larger buffer, as nccl-tests counts it\n"
    "  -e SIZE        largest size (1G on GPUs, 16M on host memory; capped by free memory)\n"
    "  -f FACTOR      multiply the size by FACTOR between steps (2)\n"
    "  -n N           timed iterations per repeat (20)\n"
    "  -w N           warm-up iterations per size (5)\n"
    "  -d TYPES       float, half, bfloat16, double, int32, int64, uint8, a comma list, or all (float)\n"
    "  -o OPS         sum, prod, max, min, avg, a comma list, or all (sum); reductions only\n"
    "  -r ROOT        broadcast's root rank (0)\n"
    "  --repeats R    timed repeats per size; the table shows their median (5)\n"
    "  --ranks N      ranks to launch when started alone (one per GPU, or 2 host ranks)\n"
    "  --backend LIST comma-separated backends, run one after the other (pickle,nccl,nccl-zero; nccl-zero is NCCL's\n"
    "                 zero-SM mode: CTAPolicy ZERO, ncclMemAlloc buffers registered as symmetric windows)\n"
    "  --json FILE    write every measurement, the environment and the topology as JSON (docs/bench.md)\n"
    "  --memory KIND  host or cuda (default: cuda when rank 0's host has a GPU per local rank)\n";

std::string_view collective_name(Collective coll) noexcept {
  switch (coll) {
    case Collective::AllReduce:
      return "allreduce";
    case Collective::AllGather:
      return "allgather";
    case Collective::Broadcast:
      return "broadcast";
    case Collective::AllToAll:
      return "alltoall";
    case Collective::ReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

bool is_reduction(Collective coll) noexcept {
  return coll == Collective::AllReduce || coll == Collective::ReduceScatter;
}

bool has_root(Collective coll) noexcept { return coll == Collective::Broadcast; }

double busbw_factor(Collective coll, int nranks) noexcept {
  const double n = nranks;
  switch (coll) {
    case Collective::AllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return (n - 1) / n;
    case Collective::Broadcast:
      return 1.0;
  }
  return 1.0;
}

CollShape coll_shape(Collective coll, std::size_t bytes, std::size_t element_size, int nranks) noexcept {
  CollShape s;
  const std::size_t elements = bytes / element_size, n = static_cast<std::size_t>(nranks);
  switch (coll) {
    case Collective::AllReduce:
    case Collective::Broadcast:
      s.count = s.send_elems = s.recv_elems = elements;
      break;
    case Collective::AllGather:
      s.count = s.send_elems = elements / n;
      s.recv_elems = s.count * n;
      break;
    case Collective::AllToAll:
      s.count = elements / n;
      s.send_elems = s.recv_elems = s.count * n;
      break;
    case Collective::ReduceScatter:
      s.count = s.recv_elems = elements / n;
      s.send_elems = s.count * n;
      break;
  }
  if (s.count == 0) return CollShape{};
  s.bytes = std::max(s.send_elems, s.recv_elems) * element_size;
  return s;
}

std::vector<Collective> parse_collectives(const std::string& text, const std::string& flag) {
  if (text == "all") return {std::begin(kAllCollectives), std::end(kAllCollectives)};
  std::vector<Collective> out;
  for (const auto& name : split_list(text, flag)) {
    auto found = std::find_if(std::begin(kAllCollectives), std::end(kAllCollectives),
                              [&](Collective c) { return collective_name(c) == name; });
    if (found == std::end(kAllCollectives)) {
      throw InvalidArgument(cat(flag, ": unknown collective '", name,
                                "' (choose from allreduce, allgather, broadcast, alltoall, reduce_scatter, all",
                                flag == "-c" ? "; -c 0 or -c 1 turns the check off or on" : "", ")"));
    }
    out.push_back(*found);
  }
  return out;
}

std::vector<std::string> parse_coll_backends(const std::string& text, const std::string& flag,
                                             std::span<const std::string_view> allowed) {
  std::vector<std::string> names = split_list(text, flag);
  for (const auto& name : names) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string choices;
      for (auto choice : allowed) choices += cat(choices.empty() ? "" : ", ", choice);
      throw InvalidArgument(cat(flag, ": unknown backend '", name, "' (choose from ", choices, ")"));
    }
  }
  return names;
}

namespace {

constexpr DataType kAllTypes[] = {DataType::F32, DataType::F16, DataType::BF16, DataType::F64,
                                  DataType::I32, DataType::I64, DataType::U8};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg};

std::vector<DataType> parse_types(const std::string& text) {
  if (text == "all") return {std::begin(kAllTypes), std::end(kAllTypes)};
  std::vector<DataType> out;
  for (const auto& name : split_list(text, "-d")) {
    auto type = parse_datatype(name);
    if (!type) {
      throw InvalidArgument(cat("-d: unknown datatype '", name,
                                "' (choose from float, half, bfloat16, double, int32, int64, uint8, all)"));
    }
    if (std::find(out.begin(), out.end(), *type) != out.end()) {
      throw InvalidArgument(cat("-d '", text, "': '", name, "' names a datatype listed already"));
    }
    out.push_back(*type);
  }
  return out;
}

std::vector<ReduceOp> parse_ops(const std::string& text) {
  if (text == "all") return {std::begin(kAllOps), std::end(kAllOps)};
  std::vector<ReduceOp> out;
  for (const auto& name : split_list(text, "-o")) {
    auto op = parse_reduce_op(name);
    if (!op)
      throw InvalidArgument(cat("-o: unknown operator '", name, "' (choose from sum, prod, max, min, avg, all)"));
    if (std::find(out.begin(), out.end(), *op) != out.end()) {
      throw InvalidArgument(cat("-o '", text, "': '", name, "' names an operator listed already"));
    }
    out.push_back(*op);
  }
  return out;
}

/// nccl-tests' -c is the check flag; here -c also names the collectives. A 0 or 1 is the check, anything else names.
bool is_check_value(const std::string& text) { return text == "0" || text == "1"; }

}  // namespace

CollOptions parse_coll_options(const std::vector<std::string>& args) {
  CollOptions options;
  FlagReader in(args);
  while (in.next()) {
    if (parse_sweep_flag(in, options, 1'000'000)) continue;
    const std::string& flag = in.flag();
    if (flag == "-c") {
      const std::string& value = in.value();
      if (is_check_value(value))
        options.check = value == "1";
      else
        options.collectives = parse_collectives(value, "-c");
    } else if (flag == "--coll") {
      options.collectives = parse_collectives(in.value(), "--coll");
    } else if (flag == "--check") {
      options.check = parse_int(in.value(), "--check", 0, 1) == 1;
    } else if (flag == "-d") {
      options.dtypes = parse_types(in.value());
    } else if (flag == "-o") {
      options.ops = parse_ops(in.value());
    } else if (flag == "-r") {
      options.root = static_cast<int>(parse_int(in.value(), "-r", 0, 1 << 20));
    } else if (flag == "--repeats") {
      options.repeats = static_cast<int>(parse_int(in.value(), "--repeats", 1, 1000));
    } else if (flag == "--ranks") {
      options.ranks = static_cast<int>(parse_int(in.value(), "--ranks", 1, 1024));
    } else if (flag == "--backend") {
      options.backends = parse_coll_backends(in.value(), "--backend", kCollBackendNames);
    } else {
      in.unknown();
    }
  }
  if (options.collectives.empty()) options.collectives = {Collective::AllReduce};
  if (options.dtypes.empty()) options.dtypes = {DataType::F32};
  if (options.ops.empty()) options.ops = {ReduceOp::Sum};
  if (options.backends.empty()) options.backends.assign(std::begin(kCollBackendNames), std::end(kCollBackendNames));
  if (options.ranks > 0 && options.root >= options.ranks) {
    throw InvalidArgument(cat("-r ", options.root, ": the root must be a rank below --ranks ", options.ranks));
  }
  settle_sweep_range(options);
  return options;
}

}  // namespace pickle::bench
