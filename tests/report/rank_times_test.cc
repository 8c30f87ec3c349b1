// tests/report/rank_times_test.cc — "which machine is slow": per-rank compute times in the metrics,
// the slowest rank and host against the median, and the rank x step heat map.
#include "report/rank_times.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/temp_dir.h"
#include "core/error.h"
#include "report/run_report.h"
#include "xml_checker.h"

namespace moe4d {
namespace {

using nlohmann::json;

// 4 ranks on 2 hosts for 20 steps; rank 3 (host b) is 1.5x slower from step 5 on.
std::string write_run(const test::TempDir& dir) {
  const std::string path = dir.file("metrics.jsonl");
  std::ofstream out(path);
  for (int step = 1; step <= 20; ++step) {
    std::vector<double> compute = {0.10, 0.11, 0.10, step >= 5 ? 0.16 : 0.105};
    json record = {{"step", step}, {"loss", 5.0 - 0.1 * step},
                   {"time", {{"step_s", 0.2}, {"compute_s", compute[0]}, {"rank_compute_s", compute}}}};
    if (step == 1) record["rank_hosts"] = {"a", "a", "b", "b"};
    out << record.dump() << "\n";
  }
  return path;
}

TEST(RankTimes, SlowestRankAndHostAgainstTheMedian) {
  test::TempDir dir;
  const MetricsLog log = read_metrics_log(write_run(dir));
  ASSERT_EQ(log.steps[3].rank_compute_s.size(), 4u);
  EXPECT_EQ(log.steps[0].rank_hosts, (std::vector<std::string>{"a", "a", "b", "b"}));
  const RankTimeSummary s = summarize_rank_times(log);
  EXPECT_EQ(s.ranks, 4);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.slowest_rank, 3);
  EXPECT_EQ(s.slowest_host, "b");
  EXPECT_DOUBLE_EQ(s.slowest_median_s, 0.16);
  EXPECT_DOUBLE_EQ(s.median_s, 0.105);  // the ranks' medians 0.10, 0.11, 0.10, 0.16
  EXPECT_EQ(describe_rank_times(s),
            "slowest rank 3 on host b: median step compute 160.0 ms, 1.52x the median rank (105.0 ms); slowest in "
            "16 of 20 steps");
}

TEST(RankTimes, HeatMapRowPerRankLabelledWithItsHost) {
  test::TempDir dir;
  const std::string metrics = write_run(dir);
  const MetricsLog log = read_metrics_log(metrics);
  const std::string svg = rank_compute_picture(log);
  ASSERT_FALSE(svg.empty());
  const test::XmlElement root = test::parse_xml(svg);
  EXPECT_NE(svg.find(">3 b<"), std::string::npos);
  EXPECT_GE(test::count_elements(root, "rect"), 80u);  // 4 ranks x 20 steps of cells
  const auto files = write_run_report(metrics, dir.file("out"));
  EXPECT_NE(std::find(files.begin(), files.end(), dir.file("out") + "/rank_compute.svg"), files.end());
}

TEST(RankTimes, RunsWithoutPerRankTimesHaveNoPictureAndSaySo) {
  test::TempDir dir;
  std::ofstream(dir.file("m.jsonl")) << R"({"step": 1, "loss": 2.0})" << "\n";
  const MetricsLog log = read_metrics_log(dir.file("m.jsonl"));
  EXPECT_EQ(summarize_rank_times(log).ranks, 0);
  EXPECT_EQ(rank_compute_picture(log), "");
  EXPECT_EQ(describe_rank_times(summarize_rank_times(log)), "no per-rank step times in the metrics");
}

TEST(RankTimes, BadFieldsNameTheLine) {
  test::TempDir dir;
  std::ofstream(dir.file("m.jsonl")) << R"({"step": 1, "time": {"rank_compute_s": [0.1, "x"]}})" << "\n"
                                     << R"({"step": 2, "rank_hosts": [1]})" << "\n";
  try {
    read_metrics_log(dir.file("m.jsonl"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.jsonl:1: \"time.rank_compute_s[1]\" must be a number, got a string"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moe4d
