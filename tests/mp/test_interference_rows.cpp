// `pickle bench interference` with any number of ranks, the parts of the report that need no GPU: how the ranks'
// measurements combine into a row (mean, min and max of the relative throughput, sums of wrong bytes, every rank's
// overlap), the row's JSON both ways, the foregrounds as the ranks agree on them, and the table and result file that
// show all of it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <pickle/error.hpp>

#include "../../tools/pickle/bench/gpu_telemetry.hpp"
#include "../../tools/pickle/bench/interference_options.hpp"
#include "../../tools/pickle/bench/interference_plan.hpp"
#include "../../tools/pickle/bench/interference_report.hpp"
#include "../../tools/pickle/bench/interference_row.hpp"
#include "bench_test_util.hpp"
#include "core/json.hpp"

namespace pickle::test {
namespace {

using bench::InterferenceRow;
using bench::RankMeasurement;

constexpr std::size_t kMiB = std::size_t{1} << 20;

bench::InterferenceOptions options_of(const std::vector<std::string>& args) {
  return bench::parse_interference_options(args);
}

/// A rank's measurement: t_alone 1 ms (0.9 before, 1.1 after), t_with = 1 / relative, a window that overlapped by
/// `lead` and `tail` ms.
RankMeasurement measured(int rank, double relative, double gbps = 100, double lead = 5, double tail = 5) {
  RankMeasurement m;
  m.rank = rank;
  m.alone_before_ms = 0.9;
  m.alone_after_ms = 1.1;
  m.with_ms = 1.0 / relative;
  m.window.window_ms = 20;
  m.window.gbps = gbps;
  m.window.bytes_in_window = gbps * 20e6;
  m.window.completed_in_window = 7;
  m.window.messages = 30;
  m.window.lead_ms = lead;
  m.window.tail_ms = tail;
  m.window.max_gap_ms = 2.5;
  m.window.overlap = lead >= 0 && tail >= 0;
  m.background_wrong = 0;
  m.foreground_wrong = 0;
  return m;
}

InterferenceRow allgather_row(std::vector<RankMeasurement> ranks) {
  InterferenceRow row;
  row.foreground = "attention";
  row.background = "allgather";
  row.backend = "pickle";
  row.bytes = 8 * kMiB;
  row.ranks = std::move(ranks);
  return row;
}

/// What print_interference_table writes.
std::string printed(const bench::InterferenceReport& report) {
  return printed_by([&](std::FILE* out) { bench::print_interference_table(report, out); });
}

TEST(InterferenceRow, RelativeIsTheMeanOverRanksWithMinAndMax) {
  InterferenceRow row = allgather_row({measured(0, 0.8, 90), measured(1, 0.9, 100), measured(2, 1.0, 110)});
  ASSERT_TRUE(row.measured());
  EXPECT_NEAR(row.relative(), 0.9, 1e-12);
  EXPECT_NEAR(row.relative_min(), 0.8, 1e-12);
  EXPECT_NEAR(row.relative_max(), 1.0, 1e-12);
  EXPECT_NEAR(row.alone_ms(), 1.0, 1e-12);
  EXPECT_NEAR(row.alone_before_ms(), 0.9, 1e-12);
  EXPECT_NEAR(row.alone_after_ms(), 1.1, 1e-12);
  EXPECT_NEAR(row.with_ms(), (1 / 0.8 + 1 / 0.9 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(row.gbps(), 100, 1e-9);
  EXPECT_TRUE(row.overlap());
  EXPECT_EQ(row.background_wrong(), 0u);
  EXPECT_TRUE(row.passed());

  // The mean of the ratios, not the ratio of the means: they differ when the ranks do.
  InterferenceRow uneven = allgather_row({measured(0, 0.5), measured(1, 1.0)});
  EXPECT_NEAR(uneven.relative(), 0.75, 1e-12);
  EXPECT_NEAR(uneven.alone_ms() / uneven.with_ms(), 1.0 / 1.5, 1e-12);
}

TEST(InterferenceRow, OneRankWithoutOverlapOrWithWrongBytesFailsTheRow) {
  InterferenceRow late = allgather_row({measured(0, 0.9), measured(1, 0.9, 100, -1.5, 4), measured(2, 0.9)});
  EXPECT_FALSE(late.overlap());
  EXPECT_FALSE(late.passed());
  EXPECT_EQ(late.weakest().rank, 1);  // the rank whose background started after its window opened

  InterferenceRow tail = allgather_row({measured(0, 0.9, 100, 3, 8), measured(1, 0.9, 100, 6, 0.5)});
  EXPECT_TRUE(tail.overlap());
  EXPECT_EQ(tail.weakest().rank, 1);  // least background after its window

  InterferenceRow wrong = allgather_row({measured(0, 0.9), measured(1, 0.9), measured(2, 0.9)});
  wrong.ranks[1].background_wrong = 5;
  wrong.ranks[2].background_wrong = 7;
  wrong.ranks[0].foreground_wrong = 2;
  EXPECT_EQ(wrong.background_wrong(), 12u);  // summed over the ranks
  EXPECT_EQ(wrong.foreground_wrong(), 2u);
  EXPECT_FALSE(wrong.passed());

  InterferenceRow unchecked = allgather_row({measured(0, 0.9), measured(1, 0.9)});
  for (auto& r : unchecked.ranks) r.background_wrong.reset();
  EXPECT_FALSE(unchecked.background_wrong().has_value());  // -c 0
  EXPECT_TRUE(unchecked.passed());

  InterferenceRow failed = allgather_row({});
  failed.error = "rank 3: ncclAllGather failed";
  EXPECT_FALSE(failed.measured());
  EXPECT_EQ(failed.relative(), 0);
  EXPECT_FALSE(failed.overlap());
  EXPECT_FALSE(failed.passed());
  EXPECT_THROW(failed.weakest(), InvalidArgument);
}

TEST(InterferenceRow, JsonKeepsTheOldKeysAndAddsEveryRanksFigures) {
  InterferenceRow row = allgather_row({measured(0, 0.8, 90, 4, 9), measured(1, 0.9, 100, 2, 3), measured(2, 1.0)});
  row.ranks[2].background_wrong = 3;
  const json::Value j = row_to_json(row);
  EXPECT_EQ(j.at("ranks").as_int(), 3);
  EXPECT_NEAR(j.at("relative").as_double(), 0.9, 1e-12);
  EXPECT_NEAR(j.at("relative_min").as_double(), 0.8, 1e-12);
  EXPECT_NEAR(j.at("relative_max").as_double(), 1.0, 1e-12);
  EXPECT_NEAR(j.at("t_alone_ms").as_double(), 1.0, 1e-12);
  EXPECT_NEAR(j.at("background_gbps").as_double(), (90.0 + 100 + 100) / 3, 1e-9);
  EXPECT_TRUE(j.at("overlap").as_bool());
  EXPECT_EQ(j.at("window").at("rank").as_int(), 1);  // the weakest window: 2 ms before, 3 ms after
  EXPECT_NEAR(j.at("window").at("lead_ms").as_double(), 2, 1e-12);
  EXPECT_EQ(j.at("background_wrong").as_int(), 3);
  EXPECT_FALSE(j.at("passed").as_bool());
  ASSERT_EQ(j.at("per_rank").size(), 3u);
  EXPECT_EQ(j.at("per_rank").at(2).at("rank").as_int(), 2);
  EXPECT_NEAR(j.at("per_rank").at(0).at("relative").as_double(), 0.8, 1e-12);
  EXPECT_EQ(j.at("per_rank").at(2).at("background_wrong").as_int(), 3);

  // Through text and back, as the ranks' payloads travel: every field of every rank survives.
  const InterferenceRow back = bench::row_from_json(json::parse(j.dump()));
  EXPECT_EQ(back.foreground, "attention");
  EXPECT_EQ(back.background, "allgather");
  EXPECT_EQ(back.backend, "pickle");
  EXPECT_EQ(back.bytes, 8 * kMiB);
  EXPECT_TRUE(back.error.empty());
  ASSERT_EQ(back.ranks.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const RankMeasurement& a = row.ranks[i];
    const RankMeasurement& b = back.ranks[i];
    EXPECT_EQ(b.rank, a.rank);
    EXPECT_EQ(b.alone_before_ms, a.alone_before_ms);
    EXPECT_EQ(b.alone_after_ms, a.alone_after_ms);
    EXPECT_EQ(b.with_ms, a.with_ms);
    EXPECT_EQ(b.window.gbps, a.window.gbps);
    EXPECT_EQ(b.window.overlap, a.window.overlap);
    EXPECT_EQ(b.window.window_ms, a.window.window_ms);
    EXPECT_EQ(b.window.bytes_in_window, a.window.bytes_in_window);
    EXPECT_EQ(b.window.completed_in_window, a.window.completed_in_window);
    EXPECT_EQ(b.window.messages, a.window.messages);
    EXPECT_EQ(b.window.lead_ms, a.window.lead_ms);
    EXPECT_EQ(b.window.tail_ms, a.window.tail_ms);
    EXPECT_EQ(b.window.max_gap_ms, a.window.max_gap_ms);
    EXPECT_EQ(b.background_wrong, a.background_wrong);
    EXPECT_EQ(b.foreground_wrong, a.foreground_wrong);
  }
  EXPECT_EQ(row_to_json(back), j);
}

TEST(InterferenceRow, AOneRankRowReadsAsBeforeAndAFailedOneHasNoFigures) {
  InterferenceRow p2p;
  p2p.foreground = "gemm";
  p2p.background = "p2p";
  p2p.backend = "nccl";
  p2p.bytes = 4096;
  p2p.ranks = {measured(1, 0.8)};
  const json::Value j = row_to_json(p2p);
  EXPECT_EQ(j.at("ranks").as_int(), 1);
  EXPECT_NEAR(j.at("t_alone_before_ms").as_double(), 0.9, 1e-12);
  EXPECT_NEAR(j.at("t_alone_after_ms").as_double(), 1.1, 1e-12);
  EXPECT_NEAR(j.at("t_with_ms").as_double(), 1.25, 1e-12);
  EXPECT_NEAR(j.at("relative").as_double(), 0.8, 1e-12);
  EXPECT_EQ(j.at("relative_min"), j.at("relative"));
  EXPECT_EQ(j.at("relative_max"), j.at("relative"));
  EXPECT_EQ(j.at("window").at("rank").as_int(), 1);
  EXPECT_EQ(j.at("window").at("messages").as_int(), 30);
  EXPECT_TRUE(j.at("passed").as_bool());
  EXPECT_TRUE(j.at("error").is_null());

  InterferenceRow failed;
  failed.foreground = "gemm";
  failed.background = "allgather";
  failed.backend = "nccl";
  failed.bytes = 4096;
  failed.error = "nccl allgather of 4 ranks under gemm of 4096 bytes: rank 2: timeout";
  const json::Value f = row_to_json(failed);
  EXPECT_EQ(f.at("ranks").as_int(), 0);
  EXPECT_EQ(f.at("per_rank").size(), 0u);
  for (const char* key : {"t_alone_ms", "t_with_ms", "relative", "relative_min", "relative_max", "background_gbps",
                          "window", "background_wrong"}) {
    EXPECT_TRUE(f.at(key).is_null()) << key;
  }
  EXPECT_FALSE(f.at("passed").as_bool());
  const InterferenceRow back = bench::row_from_json(json::parse(f.dump()));
  EXPECT_EQ(back.error, failed.error);
  EXPECT_TRUE(back.ranks.empty());
  EXPECT_THROW(bench::row_from_json(json::parse(R"({"foreground":"gemm","background":"p2p","backend":"nccl",
                                                   "bytes":1,"error":null})")),
               ProtocolError);
}

std::string foregrounds_payload(const std::vector<bench::ForegroundInfo>& infos) {
  json::Value array = json::Value::array();
  for (const auto& info : infos) array.push_back(bench::foreground_to_json(info));
  return array.dump();
}

bench::ForegroundInfo foreground(const std::string& name, bench::RunStatus status, const std::string& detail) {
  bench::ForegroundInfo info;
  info.name = name;
  info.description = name + " on this rank";
  info.status = status;
  info.detail = detail;
  return info;
}

TEST(InterferenceRow, TheRanksAgreeOnTheForegroundsTheWorstStatusWinning) {
  using bench::RunStatus;
  const std::vector<std::string> payloads = {
      "",  // a rank that does not measure
      foregrounds_payload({foreground("gemm", RunStatus::Ok, "cuBLASLt"), foreground("attention", RunStatus::Ok, "")}),
      foregrounds_payload({foreground("gemm", RunStatus::Unavailable, "no cuBLASLt"),
                           foreground("attention", RunStatus::Ok, "")}),
      foregrounds_payload({foreground("gemm", RunStatus::Failed, "check failed"),
                           foreground("attention", RunStatus::Ok, "")})};
  const auto combined = bench::combine_foregrounds(payloads);
  ASSERT_EQ(combined.size(), 2u);
  EXPECT_EQ(combined[0].name, "gemm");
  EXPECT_EQ(combined[0].status, RunStatus::Failed);
  EXPECT_EQ(combined[0].detail, "rank 3: check failed");
  EXPECT_EQ(combined[0].description, "gemm on this rank");
  EXPECT_EQ(combined[1].status, RunStatus::Ok);

  // Unavailable on one rank beats ok elsewhere, and names the rank.
  const auto unavailable = bench::combine_foregrounds(
      {foregrounds_payload({foreground("gemm", RunStatus::Ok, "")}),
       foregrounds_payload({foreground("gemm", RunStatus::Unavailable, "no cuBLASLt")})});
  EXPECT_EQ(unavailable[0].status, RunStatus::Unavailable);
  EXPECT_EQ(unavailable[0].detail, "rank 1: no cuBLASLt");

  EXPECT_TRUE(bench::combine_foregrounds({"", ""}).empty());
  EXPECT_THROW(bench::combine_foregrounds({foregrounds_payload({foreground("gemm", RunStatus::Ok, "")}),
                                           foregrounds_payload({foreground("attention", RunStatus::Ok, "")})}),
               ProtocolError);
  EXPECT_THROW(bench::combine_foregrounds({foregrounds_payload({foreground("gemm", RunStatus::Ok, "")}), "[]"}),
               ProtocolError);
}

TEST(InterferenceRow, TheTableAndTheFileShowEveryRank) {
  bench::InterferenceReport report;
  report.options = options_of({"--background", "p2p,allgather", "--ranks", "3", "--share-gpus"});
  report.world_size = 3;
  report.allgather_ranks = 3;
  report.gpus_shared = true;
  report.notes = {bench::gpu_sharing_note(3, 1)};
  InterferenceRow p2p;
  p2p.foreground = "gemm";
  p2p.background = "p2p";
  p2p.backend = "pickle";
  p2p.bytes = 4096;
  p2p.ranks = {measured(1, 0.95)};
  report.rows.push_back(p2p);
  report.rows.push_back(allgather_row({measured(0, 0.8), measured(1, 0.9), measured(2, 1.0, 100, 5, -1)}));

  const std::string out = printed(report);
  EXPECT_NE(out.find("# pickle bench interference: 3 ranks,"), std::string::npos) << out;
  EXPECT_NE(out.find("# p2p: rank 0 -> rank 1; rank 1 runs the foreground"), std::string::npos) << out;
  EXPECT_NE(out.find("# allgather: ranks 0..2 each contribute size/3"), std::string::npos) << out;
  EXPECT_NE(out.find("# note: --share-gpus: 3 ranks share 1 GPU"), std::string::npos) << out;
  // The allgather's row: 3 ranks, the mean 0.900 with 0.800..1.000 beside it, and rank 2's missing tail fails it.
  EXPECT_NE(out.find("\n  attention allgather  pickle      8388608     3       1.000      1.120    0.900  "
                     "0.800..1.000     100.0      NO       0\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\n       gemm       p2p  pickle         4096     1       1.000      1.053    0.950"
                     "             -     100.0     yes       0\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("# per rank: attention allgather pickle 8388608: r0 0.800 (100.0 GB/s), r1 0.900 (100.0 GB/s), "
                     "r2 1.000 (100.0 GB/s, NO overlap)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("# per rank: gemm"), std::string::npos) << "one rank needs no breakdown: " << out;

  const json::Value root = bench::interference_to_json(report);
  EXPECT_EQ(root.at("allgather_ranks").as_int(), 3);
  EXPECT_TRUE(root.at("gpus_shared").as_bool());
  EXPECT_TRUE(root.at("options").at("share_gpus").as_bool());
  EXPECT_EQ(root.at("options").at("ranks").as_int(), 3);
  ASSERT_EQ(root.at("results").size(), 2u);
  EXPECT_EQ(root.at("results").at(1).at("per_rank").size(), 3u);
  EXPECT_EQ(root.at("exit_code").as_int(), 1);  // the allgather row did not overlap on rank 2
}

TEST(GpuTelemetry, TheSummaryAveragesTheReadingsAndCountsTheReasonsAndMergesByReadings) {
  using bench::TelemetrySample;
  namespace reason = bench::clock_reason;
  const std::vector<TelemetrySample> samples = {
      {.sm_mhz = 1980, .power_mw = 500'000, .reasons = 0},
      {.sm_mhz = 1800, .power_mw = 700'000, .reasons = reason::kSwPowerCap},
      {.sm_mhz = 1700, .power_mw = 700'000, .reasons = reason::kSwPowerCap | reason::kHwThermal},
      {.sm_mhz = 1600, .power_mw = 600'000, .reasons = reason::kHwPowerBrake | 0x1}};
  const bench::TelemetrySummary s = bench::summarize(samples);
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.sm_mhz, (1980.0 + 1800 + 1700 + 1600) / 4);
  EXPECT_DOUBLE_EQ(s.power_w, 625.0);
  EXPECT_DOUBLE_EQ(s.power_capped, 0.5);
  EXPECT_DOUBLE_EQ(s.thermal, 0.25);
  EXPECT_DOUBLE_EQ(s.hw_slowdown, 0.25);
  EXPECT_EQ(bench::summarize({}).samples, 0);

  // One reading against three: the merge weighs them so.
  const bench::TelemetrySummary one = bench::summarize(std::span(samples).first(1));
  const bench::TelemetrySummary three = bench::summarize(std::span(samples).subspan(1));
  const bench::TelemetrySummary merged = bench::merge(one, three);
  EXPECT_EQ(merged.samples, 4);
  EXPECT_DOUBLE_EQ(merged.sm_mhz, s.sm_mhz);
  EXPECT_DOUBLE_EQ(merged.power_capped, s.power_capped);
  EXPECT_DOUBLE_EQ(bench::merge({}, one).sm_mhz, 1980.0);

  const bench::TelemetrySummary back = bench::telemetry_from_json(json::parse(bench::telemetry_to_json(s).dump()));
  EXPECT_EQ(back.samples, 4);
  EXPECT_DOUBLE_EQ(back.power_w, s.power_w);
  EXPECT_DOUBLE_EQ(back.hw_slowdown, s.hw_slowdown);
  EXPECT_THROW(bench::telemetry_from_json(json::parse(R"({"samples": 3})")), ProtocolError);
}

/// Telemetry of `mhz` alone (both measurements) and `mhz_with` with the traffic, 10 readings each.
void sample(RankMeasurement& m, double mhz, double mhz_with, double watts = 600) {
  const bench::TelemetrySummary alone{.samples = 10, .sm_mhz = mhz, .power_w = watts, .power_capped = 0.5};
  m.telemetry_alone_before = alone;
  m.telemetry_alone_after = alone;
  m.telemetry_with = bench::TelemetrySummary{.samples = 10, .sm_mhz = mhz_with, .power_w = 700, .power_capped = 1};
  m.telemetry_source = "NVML test, GPU 0000:18:00.0";
}

TEST(InterferenceRow, TheGpuClockTravelsWithEachRankAndTheRowShowsItsMeanBesideTheRelative) {
  InterferenceRow row = allgather_row({measured(0, 0.9), measured(1, 0.9)});
  sample(row.ranks[0], 1980, 1800);
  sample(row.ranks[1], 1960, 1780);
  const json::Value j = row_to_json(row);
  EXPECT_NEAR(j.at("telemetry_alone").at("sm_mhz").as_double(), 1970, 1e-9);
  EXPECT_NEAR(j.at("telemetry_with").at("sm_mhz").as_double(), 1790, 1e-9);
  EXPECT_EQ(j.at("telemetry_with").at("samples").as_int(), 20);
  EXPECT_NEAR(j.at("telemetry_alone").at("power_capped").as_double(), 0.5, 1e-12);
  EXPECT_EQ(j.at("per_rank").at(1).at("telemetry").at("source").as_string(), "NVML test, GPU 0000:18:00.0");
  const InterferenceRow back = bench::row_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back.ranks[1].telemetry_with.has_value());
  EXPECT_EQ(back.ranks[1].telemetry_with->sm_mhz, 1780);
  EXPECT_EQ(back.ranks[0].telemetry_alone_after->sm_mhz, 1980);
  EXPECT_EQ(row_to_json(back), j);

  bench::InterferenceReport report;
  report.options = options_of({"--background", "allgather"});
  report.world_size = 2;
  report.allgather_ranks = 2;
  report.rows.push_back(row);
  const std::string out = printed(report);
  EXPECT_NE(out.find("# GPU telemetry of the foreground's GPU over each timed window"), std::string::npos) << out;
  EXPECT_NE(out.find(": NVML test, GPU 0000:18:00.0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# clock: attention allgather pickle 8388608: SM 1970 -> 1790 MHz (0.909), power 600 -> 700 W, "
                     "power cap 50% -> 100% of the readings\n"),
            std::string::npos)
      << out;

  // A rank without readings (no NVML there): the row has no clock, and the table no clock line.
  row.ranks[1].telemetry_with.reset();
  row.ranks[1].telemetry_source = "not sampled: no NVML";
  EXPECT_TRUE(row_to_json(row).at("telemetry_with").is_null());
  report.rows = {row};
  EXPECT_EQ(printed(report).find("# clock:"), std::string::npos);
}

}  // namespace
}  // namespace pickle::test
