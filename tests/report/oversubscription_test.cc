// tests/report/oversubscription_test.cc — an oversubscribed run's pictures say so (issue 30): the
// metrics' `oversubscription` record and time.rank_descheduled_s become a note on step_time.svg and
// comm_share.svg with the measured share of the step spent waiting for a CPU; a run without it
// gets no note.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../common/temp_dir.h"
#include "report/metrics_log.h"
#include "report/run_report.h"

namespace moe4d {
namespace {

using nlohmann::json;

// 2 ranks, 10 steps of 0.2 s with 0.05 s exposed EP communication; each rank waited `waited` s for
// a CPU per step; the first record says the host was oversubscribed when `over`.
std::string write_run(const test::TempDir& dir, bool over, double waited) {
  const std::string path = dir.file("metrics.jsonl");
  std::ofstream out(path);
  for (int step = 1; step <= 10; ++step) {
    json record = {{"step", step},
                   {"loss", 5.0},
                   {"time",
                    {{"step_s", 0.2},
                     {"compute_s", 0.15},
                     {"comm_exposed_s", 0.05},
                     {"comm", {{"ep", {{"exposed_s", 0.05}}}}},
                     {"rank_compute_s", {0.15, 0.15}},
                     {"rank_descheduled_s", {waited, waited}}}}};
    if (step == 1) {
      record["rank_hosts"] = {"vm", "vm"};
      if (over) record["oversubscription"] = {{"hosts", {{{"host", "vm"}, {"ranks", 2}, {"threads", 2}, {"cores", 1}}}}};
    }
    out << record.dump() << "\n";
  }
  return path;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Oversubscription, NoteWithTheMeasuredShareOnThePictures) {
  test::TempDir dir;
  const std::string metrics = write_run(dir, true, 0.1);
  const MetricsLog log = read_metrics_log(metrics);
  ASSERT_EQ(log.steps[0].oversubscribed.size(), 1u);
  EXPECT_EQ(log.steps[0].oversubscribed[0].cores, 1);
  EXPECT_EQ(log.steps[4].rank_descheduled_s, (std::vector<double>{0.1, 0.1}));
  const std::string note = oversubscription_note(log);
  EXPECT_EQ(note,
            "oversubscribed: 2 rank threads on 1 cores of host vm: the ranks waited for a CPU 50% of their step time, so "
            "exposed communication is mostly that, not waiting for a peer");
  write_run_report(metrics, dir.path());
  EXPECT_NE(read(dir.file("step_time.svg")).find(note), std::string::npos);
  EXPECT_NE(read(dir.file("comm_share.svg")).find(note), std::string::npos);
}

TEST(Oversubscription, NoNoteWithoutIt) {
  test::TempDir dir;
  const std::string metrics = write_run(dir, false, 0.0);
  EXPECT_EQ(oversubscription_note(read_metrics_log(metrics)), "");
  write_run_report(metrics, dir.path());
  EXPECT_EQ(read(dir.file("step_time.svg")).find("oversubscribed"), std::string::npos);
}

}  // namespace
}  // namespace moe4d
