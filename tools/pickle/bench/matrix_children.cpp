#include "matrix_children.hpp"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "table_text.hpp"
#include "transports_child.hpp"
#include "transports_configs.hpp"
#include "transports_extract.hpp"

namespace pickle::bench {
namespace {

void say(const std::string& text) {
  std::fprintf(stderr, "bench matrix: %s\n", text.c_str());
  std::fflush(stderr);
}

/// One child to run: the ordered pair and what it measures.
struct Plan {
  int sender = 0, receiver = 0;
  std::vector<std::string> modes;
};

/// Every child in the order they run: per pair i < j, i -> j (uni and bi), then j -> i (uni only: bi is symmetric).
std::vector<Plan> plan_children(const MatrixOptions& options, int devices) {
  std::vector<Plan> plans;
  for (int i = 0; i < devices; ++i) {
    for (int j = i + 1; j < devices; ++j) {
      Plan forward{i, j, {}};
      for (const auto& mode : options.modes) forward.modes.push_back(mode);
      plans.push_back(std::move(forward));
      if (options.has_mode("uni")) plans.push_back(Plan{j, i, {"uni"}});
    }
  }
  return plans;
}

std::vector<std::string> child_arguments(const MatrixReport& report, const Plan& plan, const std::string& json_path) {
  const auto& o = report.options;
  std::vector<std::string> args = {"bench", "p2p", "--ranks", "2", "--backend", ""};
  for (std::size_t b = 0; b < o.backends.size(); ++b) args.back() += (b == 0 ? "" : ",") + o.backends[b];
  std::string modes;
  for (const auto& mode : plan.modes) modes += (modes.empty() ? "" : ",") + mode;
  args.insert(args.end(), {"--mode", modes, "-b", cat(report.size), "-e", cat(report.size), "--memory", report.memory,
                           "--json", json_path});
  if (o.iterations_given) args.insert(args.end(), {"-n", cat(o.iterations)});
  if (o.warmup_given) args.insert(args.end(), {"-w", cat(o.warmup)});
  if (o.repeats > 0) args.insert(args.end(), {"--repeats", cat(o.repeats)});
  return args;
}

Matrix& matrix_of(MatrixReport& report, const std::string& mode, const std::string& backend) {
  for (auto& matrix : report.matrices) {
    if (matrix.mode == mode && matrix.backend == backend) return matrix;
  }
  throw Error(ErrorCode::Internal, cat("bench matrix: no matrix for mode ", mode, " and backend ", backend));
}

/// Puts one reading into its cells: uni at [sender][receiver]; bi, both directions at once, at both.
void fill(MatrixReport& report, const Plan& plan, const std::string& mode, const std::string& backend,
          const RunResult& reading) {
  MatrixCell cell;
  cell.run = true;
  cell.status = reading.status;
  cell.wrong = reading.wrong;
  cell.detail = reading.detail;
  if (reading.status == RunResult::Status::Ok) {
    auto it = reading.gbps.find(report.size);
    if (it != reading.gbps.end()) cell.gbps = it->second;
  }
  Matrix& matrix = matrix_of(report, mode, backend);
  matrix.cells[plan.sender][plan.receiver] = cell;
  if (mode == "bi") matrix.cells[plan.receiver][plan.sender] = cell;
}

void run_one(MatrixReport& report, const ScratchDir& scratch, const std::string& self,
             const std::vector<std::string>& base_env, const Plan& plan, std::size_t index, std::size_t count,
             const Stopwatch& watch) {
  const std::string devices = cat(plan.sender, ",", plan.receiver);
  const std::string route = cat("GPU ", plan.sender, " -> GPU ", plan.receiver);
  say(cat("pair ", index + 1, " of ", count, " (", route, "), ", static_cast<long long>(watch.seconds()),
          " s elapsed"));
  const std::string stem = cat("pair-", plan.sender, "-", plan.receiver);
  const std::string json_path = scratch / (stem + ".json"), err_path = scratch / (stem + ".err");
  // The device order makes child rank 0 the sender: rank r uses the r-th visible device.
  const Configuration config{stem, route, "", {{"CUDA_VISIBLE_DEVICES", devices}}, {}};
  std::vector<std::string> args = child_arguments(report, plan, json_path);
  ChildOutcome outcome = run_child(self, args, child_environment(base_env, config), scratch / (stem + ".out"),
                                   err_path, child_limit());

  PairRun pair;
  pair.sender = plan.sender;
  pair.receiver = plan.receiver;
  pair.modes = plan.modes;
  pair.command = {"pickle"};
  pair.command.insert(pair.command.end(), args.begin(), args.end());
  for (const auto& [name, value] : kCommonEnv) pair.env.emplace_back(name, value);
  pair.env.insert(pair.env.end(), config.set.begin(), config.set.end());
  pair.exit_code = outcome.exited ? outcome.exit_code : -1;
  pair.seconds = outcome.seconds;
  std::vector<std::string> said;
  for (const auto& mode : plan.modes) {
    for (const auto& backend : report.options.backends) {
      ChildMeasurement what{.op = TransportOp::P2p,
                            .backend = backend,
                            .mode = mode,
                            .env = config.set,
                            .who = cat("`pickle bench p2p` for ", route, " (", backend, " ", mode, ") "),
                            .shared = true};
      RunResult reading = read_child_measurement(what, outcome, json_path, err_path);
      if (reading.status == RunResult::Status::Failed && !pair.failed) {
        pair.failed = true;
        pair.detail = reading.detail;
        pair.stderr_tail = reading.stderr_tail;
      }
      if (reading.status == RunResult::Status::Ok) {
        auto it = reading.gbps.find(report.size);
        said.push_back(cat(backend, " ", mode, " ", it != reading.gbps.end() ? fixed(it->second, 1) : "?", " GB/s"));
      } else {
        said.push_back(cat(backend, " ", mode, " ", run_status_name(reading.status)));
      }
      fill(report, plan, mode, backend, reading);
    }
  }
  if (!outcome.ok() && !pair.failed) {
    // Exit code 1 with every backend's record clean: the child failed at something no backend owns.
    pair.failed = true;
    pair.detail = cat("`pickle bench p2p` for ", route, " ", outcome.describe(),
                      ", but its result file names no failed backend");
    pair.stderr_tail = file_tail(err_path, 15);
    for (const auto& mode : plan.modes) {
      for (const auto& backend : report.options.backends) {
        RunResult failed;
        failed.detail = pair.detail;
        fill(report, plan, mode, backend, failed);
      }
    }
  }
  std::string summary;
  for (const auto& item : said) summary += (summary.empty() ? "" : ", ") + item;
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s", outcome.seconds);
  if (pair.failed) {
    say(cat("  ", route, " FAILED: ", pair.detail));
    std::string tail = pair.stderr_tail.empty() ? std::string("  (its stderr is empty)\n") : pair.stderr_tail;
    std::fprintf(stderr, "bench matrix:   its stderr, last lines:\n%s", tail.c_str());
    std::fflush(stderr);
  } else {
    say(cat("  ", route, ": ", took, ": ", summary));
  }
  report.pairs.push_back(std::move(pair));
}

}  // namespace

void run_matrix_children(MatrixReport& report) {
  const auto devices = static_cast<std::size_t>(report.devices);
  for (const auto& mode : report.options.modes) {
    for (const auto& backend : report.options.backends) {
      report.matrices.push_back(Matrix{mode, backend, std::vector(devices, std::vector<MatrixCell>(devices))});
    }
  }
  ScratchDir scratch;
  const std::string self = self_executable();
  const std::vector<std::string> base_env = current_environment();
  const std::vector<Plan> plans = plan_children(report.options, report.devices);
  Stopwatch watch;
  // One child at a time: two children at once would share links and disturb each other's numbers.
  for (std::size_t i = 0; i < plans.size(); ++i) {
    run_one(report, scratch, self, base_env, plans[i], i, plans.size(), watch);
  }
  say(cat(plans.size(), " children in ", static_cast<long long>(watch.seconds()), " s"));
}

}  // namespace pickle::bench
