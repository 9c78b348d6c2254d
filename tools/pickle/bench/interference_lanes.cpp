#include "interference_lanes.hpp"

#include <cstdio>

#include <pickle/error.hpp>

#include "core/clock.hpp"
#include "core/format.hpp"
#include "interference_lanes_args.hpp"
#include "interference_lanes_merge.hpp"
#include "interference_report.hpp"
#include "result_file.hpp"
#include "table_text.hpp"
#include "transports_child.hpp"

namespace pickle::bench {
namespace {

void say(const std::string& text) {
  std::fprintf(stderr, "bench interference: %s\n", text.c_str());
  std::fflush(stderr);
}

/// One line on how the child's traffic run ended, and its rows' relative throughputs.
void say_outcome(const InterferenceReport& report, const LanesChild& child, double seconds) {
  const TrafficRun& run = report.traffic.back();
  std::string figures;
  for (const auto& row : report.rows) {
    if (row.lanes != child.lanes || row.backend != child.backend) continue;
    figures += cat(figures.empty() ? "" : ", ", row.foreground, " ", row.bytes, " ",
                   row.measured() ? fixed(row.relative(), 3) : std::string("FAILED"));
  }
  say(cat("  lanes ", child.lanes, " ", child.backend, ": ", run_status_name(run.status), " in ",
          fixed(seconds, 1), " s", run.detail.empty() ? "" : ": ", run.detail,
          figures.empty() ? "" : "; relative: ", figures));
}

}  // namespace

int run_interference_lanes(const InterferenceOptions& options, const std::vector<std::string>& args) {
  require_writable(options.json_path);
  InterferenceReport report;
  report.options = options;
  report.command = {"pickle", "bench", "interference"};
  report.command.insert(report.command.end(), args.begin(), args.end());
  report.started_utc = utc_now();

  ScratchDir scratch;
  const std::string self = self_executable();
  const std::vector<std::string> base_env = current_environment();
  const std::vector<LanesChild> children = plan_lanes_children(options);
  Stopwatch watch;
  // One child at a time: two at once would share the GPUs and the loopback and disturb each other's figures.
  for (std::size_t i = 0; i < children.size(); ++i) {
    const LanesChild& child = children[i];
    say(cat("child ", i + 1, " of ", children.size(), " (", child.config.name, "), ",
            static_cast<long long>(watch.seconds()), " s elapsed"));
    const std::string stem = cat("lanes", child.lanes, "-", child.backend);
    const std::string json_path = scratch / (stem + ".json"), err_path = scratch / (stem + ".err");
    const std::vector<std::string> child_args = lanes_child_arguments(args, child.backend, json_path);
    const ChildOutcome outcome = run_child(self, child_args, child_environment(base_env, child.config),
                                           scratch / (stem + ".out"), err_path, child_limit());
    merge_lanes_child(report, child, outcome, json_path, err_path);
    say_outcome(report, child, outcome.seconds);
  }

  print_interference_table(report, stdout);
  if (!options.json_path.empty()) write_result_file(interference_to_json(report), options.json_path);
  say(cat(children.size(), " children in ", static_cast<long long>(watch.seconds()), " s",
          report.exit_code() == 0 ? "" : "; FAILED"));
  return report.exit_code();
}

}  // namespace pickle::bench
