// tests/plan/validation_test.cc — the planner's predictions for the published runs of docs/planner.md
// §Validation must not move unnoticed.
//
// tests/plan/data/validation_table.tsv holds each run's prediction as last regenerated, and
// docs/planner.md the table made from it. A change to the planner that moves any prediction by more
// than 2% fails here until scripts/plan_validation.sh regenerates both (the script runs this test
// with MOE4D_PLAN_VALIDATION_WRITE=1, which writes the files instead of checking them). A second test
// holds the table's step-time errors to what the planner achieves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "plan/plan_report.h"
#include "plan/published_runs.h"

namespace moe4d {
namespace {

const std::string kSource = MOE4D_SOURCE_DIR;
const std::string kTable = kSource + "/tests/plan/data/validation_table.tsv";
const std::string kDoc = kSource + "/docs/planner.md";
const std::string kBegin = "<!-- validation table: scripts/plan_validation.sh writes it -->\n";
const std::string kEnd = "<!-- end of the validation table -->\n";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string markdown(const std::vector<ValidationRow>& rows) {
  std::string out =
      "| run | devices | layout (dp x tp x pp) | batch | published TFLOP/s per GPU | published step s | predicted step s "
      "| error | planner's variant | memory GiB |\n|---|---|---|---|---|---|---|---|---|---|\n";
  std::vector<double> errors;
  for (const ValidationRow& r : rows) {
    out += fmt::format("| {} | {} | {} x {} x {} | {} | {:g} | {:.2f} | {:.2f} | {:+.1f}% | mbs {}, {}{} | {:.1f}{} |\n", r.run.name,
                       r.run.devices, r.layout.dp, r.layout.tp, r.layout.pp, r.run.global_batch,
                       r.run.tflops_per_device, r.published_step, r.predicted_step, 100 * r.error(),
                       r.layout.micro_batch_size, schedule_name(r.layout.schedule),
                       r.layout.virtual_stages > 1 ? fmt::format(" v{}", r.layout.virtual_stages) : "",
                       r.memory_bytes / (1024.0 * 1024.0 * 1024.0), r.fits ? "" : " (does not fit)");
    errors.push_back(std::abs(r.error()));
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors.size() % 2 ? errors[errors.size() / 2]
                                          : (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]) / 2;
  out += fmt::format("\nStep time |error|: median {:.1f}%, max {:.1f}% over {} runs.\n", 100 * median,
                     100 * errors.back(), errors.size());
  return out;
}

// MOE4D_PLAN_VALIDATION_EXPLAIN=1 prints every run's full breakdown (format_explain), to see which
// parts a change moved.
TEST(Validation, ExplainOnRequest) {
  if (!std::getenv("MOE4D_PLAN_VALIDATION_EXPLAIN")) GTEST_SKIP() << "set MOE4D_PLAN_VALIDATION_EXPLAIN=1";
  for (const PublishedRun& run : published_runs()) {
    const ValidationRow row = validate_run(run);
    const PlanContext ctx = run_context(run);
    LayoutEvaluator evaluator(ctx);
    std::printf("=== %s: published %.3f s, predicted %.3f s (%+.1f%%)\n%s\n", run.name.c_str(), row.published_step,
                row.predicted_step, 100 * row.error(), format_explain(ctx, evaluator.evaluate(row.layout)).c_str());
  }
}

// What the planner achieves on the table today, held so that it cannot get worse unnoticed: step-time
// |error| median <= 7% and max <= 12% (measured 6.6% and 11.5%; issue 25's target is 5% and 10%).
// Tighten these when a change improves the table; never loosen them to admit a change.
TEST(Validation, StepTimeErrorBounds) {
  std::vector<double> errors;
  for (const PublishedRun& run : published_runs()) {
    const ValidationRow row = validate_run(run);
    EXPECT_TRUE(row.fits) << run.name << ": the published layout does not fit";
    errors.push_back(std::abs(row.error()));
  }
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  const double median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  EXPECT_LE(median, 0.07);
  EXPECT_LE(errors.back(), 0.12);
}

TEST(Validation, PredictionsMatchTheTable) {
  std::vector<ValidationRow> rows;
  for (const PublishedRun& run : published_runs()) rows.push_back(validate_run(run));
  const std::string table = markdown(rows);
  std::string doc = read_file(kDoc);
  const size_t begin = doc.find(kBegin), end = doc.find(kEnd);
  ASSERT_NE(begin, std::string::npos) << "docs/planner.md lost its validation table markers";
  ASSERT_NE(end, std::string::npos);
  if (std::getenv("MOE4D_PLAN_VALIDATION_WRITE")) {
    std::ofstream tsv(kTable);
    tsv << "# run\tpublished_step_s\tpredicted_step_s (written by scripts/plan_validation.sh)\n";
    for (const ValidationRow& r : rows)
      tsv << fmt::format("{}\t{:.6g}\t{:.6g}\n", r.run.name, r.published_step, r.predicted_step);
    doc.replace(begin + kBegin.size(), end - begin - kBegin.size(), table);
    std::ofstream(kDoc) << doc;
    std::printf("%s", table.c_str());
    return;
  }
  std::map<std::string, std::pair<double, double>> stored;
  std::istringstream in(read_file(kTable));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name;
    double published = 0, predicted = 0;
    fields >> name >> published >> predicted;
    stored[name] = {published, predicted};
  }
  for (const ValidationRow& r : rows) {
    SCOPED_TRACE(r.run.name);
    ASSERT_TRUE(stored.count(r.run.name)) << "not in tests/plan/data/validation_table.tsv: run scripts/plan_validation.sh";
    EXPECT_NEAR(r.published_step / stored[r.run.name].first, 1.0, 1e-4);
    EXPECT_NEAR(r.predicted_step / stored[r.run.name].second, 1.0, 0.02)
        << "the prediction moved by more than 2%: run scripts/plan_validation.sh and review docs/planner.md's table";
  }
  EXPECT_EQ(doc.substr(begin + kBegin.size(), end - begin - kBegin.size()), table)
      << "docs/planner.md's validation table is not the one the planner gives: run scripts/plan_validation.sh";
}

}  // namespace
}  // namespace moe4d
