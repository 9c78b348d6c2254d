#include "transports_table.hpp"

#include <optional>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "sizes.hpp"
#include "table_text.hpp"

namespace pickle::bench {
namespace {

/// pad_right and pad_left, but text as wide as its column still gets a space, so that cells never run together.
std::string cell_right(const std::string& text, std::size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

std::string cell_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? std::string(" ") + text : std::string(width - text.size(), ' ') + text;
}

constexpr std::size_t kNameWidth = 34, kRunWidth = 10, kMeanWidth = 20, kSizeWidth = 12, kCellWidth = 12,
                      kRatioWidth = 24;

/// The comparison whose gain sits on `key`'s row, or nullptr.
const Comparison* comparison_on_row(std::string_view key) {
  for (const auto& comparison : comparisons()) {
    if (comparison.fast == key) return &comparison;
  }
  return nullptr;
}

std::string config_name(std::string_view key) {
  const Configuration* config = find_configuration(key);
  return config != nullptr ? std::string(config->name) : std::string(key);
}

/// Seed 000's table at `bytes` (none: no run measured anything, so only the rows' states are shown).
void print_seed_table(const OpSection& section, std::optional<std::size_t> shown, int runs, std::FILE* out) {
  const std::size_t bytes = shown.value_or(0);
  std::string header = "# ";  // then appended: GCC 12 at -O3 warns falsely (-Wrestrict) on "#" + f()
  header += cell_right("configuration", kNameWidth - 2);
  for (int r = 1; r <= runs; ++r) header += cell_left(cat("run ", r), kRunWidth);
  header += cell_left(shown ? cat("mean GB/s (", short_size(bytes), ")") : std::string("mean GB/s"), kMeanWidth) +
            "  gain";
  std::fprintf(out, "%s\n", header.c_str());
  for (const auto& c : section.configs) {
    std::string line = "  ";
    line += cell_right(std::string(c.config->name), kNameWidth - 2);
    if (c.status() == ConfigRuns::Status::Skipped) {
      std::fprintf(out, "%sskipped: %s\n", line.c_str(), c.detail().c_str());
      continue;
    }
    for (int r = 1; r <= runs; ++r) {
      std::string cell = "-";
      for (const auto& run : c.runs) {
        if (run.run != r) continue;
        auto it = run.gbps.find(bytes);
        if (run.status == RunResult::Status::Failed) cell = "FAILED";
        else if (it != run.gbps.end()) cell = gbps_text(it->second);
      }
      line += cell_left(cell, kRunWidth);
    }
    auto mean = c.status() == ConfigRuns::Status::Ok ? c.mean(bytes) : std::nullopt;
    line += cell_left(mean ? gbps_text(*mean) : std::string("-"), kMeanWidth);
    if (const Comparison* comparison = comparison_on_row(c.config->key)) {
      auto gain = section.gain(*comparison, bytes);
      line += std::string("  ") + (gain ? cat(gain_text(*gain), " over ", config_name(comparison->slow))
                           : cat("- (", config_name(comparison->slow), " did not measure)"));
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
}

/// Means per size, and the gains as ratios.
void print_size_table(const OpSection& section, std::FILE* out) {
  // Each column as wide as its label needs (the --lanes keys, "pickle-net-1/nccl-socket-1", pass the defaults), so
  // that values stay under their labels.
  std::vector<std::size_t> config_widths, ratio_widths;
  std::string header = "#";
  header += cell_left("size", kSizeWidth - 1);
  for (const auto& c : section.configs) {
    const std::string label(c.config->key);
    config_widths.push_back(std::max(kCellWidth, label.size() + 1));
    header += cell_left(label, config_widths.back());
  }
  for (const auto& comparison : comparisons()) {
    const std::string label = cat(comparison.fast, "/", comparison.slow);
    ratio_widths.push_back(std::max(kRatioWidth, label.size() + 1));
    header += cell_left(label, ratio_widths.back());
  }
  std::fprintf(out, "%s\n", header.c_str());
  for (std::size_t bytes : section.sizes()) {
    std::string line = cell_left(cat(bytes), kSizeWidth);
    std::size_t column = 0;
    for (const auto& c : section.configs) {
      std::string cell = "-";
      if (c.status() == ConfigRuns::Status::Skipped) {
        cell = "n/a";
      } else if (auto mean = c.mean(bytes)) {
        cell = gbps_text(*mean);
        if (c.status() == ConfigRuns::Status::Failed) cell += "*";  // from the runs before the failure
      } else if (c.status() == ConfigRuns::Status::Failed) {
        cell = "FAILED";
      }
      line += cell_left(cell, config_widths[column++]);
    }
    column = 0;
    for (const auto& comparison : comparisons()) {
      auto gain = section.gain(comparison, bytes);
      line += cell_left(gain ? fixed(*gain, 3) : std::string("-"), ratio_widths[column++]);
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
}

void print_section(const TransportsReport& report, const OpSection& section, std::FILE* out) {
  const auto& o = report.options;
  const char* what = section.op == TransportOp::P2p ? "pickle bench p2p --mode uni: ranks 0 -> 1, one direction"
                                                     : "pickle bench coll -c allreduce: bus bandwidth";
  std::fprintf(out, "# pickle bench transports: %s (%s)\n", std::string(op_name(section.op)).c_str(), what);
  if (!section.skipped.empty()) {
    std::fprintf(out, "# %s skipped: %s\n\n", std::string(op_name(section.op)).c_str(), section.skipped.c_str());
    return;
  }
  std::fprintf(out, "# %d run%s per configuration, each its own process set (configurations interleaved); %s memory, "
                    "%d ranks; GB/s = 1e9 bytes/s, each run's value the median of its repeats\n",
               o.runs, o.runs == 1 ? "" : "s", report.memory.empty() ? "?" : report.memory.c_str(), report.world_size);
  // The seed's table is at one size: the largest that every configuration reached, so that means and gains compare
  // like with like. Without one (every row skipped or failed), the largest any run reached shows what there is.
  std::optional<std::size_t> shown = section.largest_common();
  if (!shown) {
    std::fprintf(out, "# no size was measured by every run of every configuration that ran: no mean, no gain\n");
    auto sizes = section.sizes();
    if (!sizes.empty()) shown = sizes.back();
  }
  print_seed_table(section, shown, o.runs, out);
  std::fprintf(out, "#\n# %s per size, mean over the runs (%s; * = from the runs before a failure); gains as ratios\n",
               std::string(op_name(section.op)).c_str(), metric_name(section.op));
  print_size_table(section, out);
  for (const auto& c : section.configs) {
    for (const auto& run : c.runs) {
      if (run.status == RunResult::Status::Failed) {
        std::fprintf(out, "# %s FAILED in run %d: %s\n", std::string(c.config->name).c_str(), run.run,
                     run.detail.c_str());
      }
    }
  }
  std::fprintf(out, "\n");
}

}  // namespace

std::string gain_text(double ratio) {
  double percent = (ratio - 1) * 100;
  return cat(fixed(ratio, 2), "x (", percent >= 0 ? "+" : "", fixed(percent, 1), "%)");
}

void print_transports_tables(const TransportsReport& report, std::FILE* out) {
  for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
  for (const auto& section : report.ops) print_section(report, section, out);
  std::fflush(out);
}

}  // namespace pickle::bench
