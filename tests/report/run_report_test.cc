// tests/report/run_report_test.cc — `moe4d report` on synthetic metrics files: the pictures a run
// gets (MoE with pipeline timeline, dense single-rank), long-run averaging, and the messages for
// bad input.
#include "report/run_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/temp_dir.h"
#include "core/error.h"
#include "xml_checker.h"

namespace moe4d {
namespace {

using nlohmann::json;
using test::count_elements;
using test::find_all;
using test::find_groups;
using test::parse_xml;
using test::TempDir;
using test::XmlElement;

std::string read(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const std::string& line : lines) out << line << '\n';
}

json comm(double exposed) { return {{"busy_s", exposed * 2}, {"exposed_s", exposed}, {"bytes", 1e6}}; }

// A record shaped like src/train/trainer.cc writes it.
json moe_record(int step, int experts, const std::vector<int>& layers) {
  json layer_list = json::array();
  for (int layer : layers) {
    std::vector<double> tokens;
    for (int e = 0; e < experts; ++e) tokens.push_back(100 + 10 * ((e + step + layer) % experts));
    layer_list.push_back({{"layer", layer}, {"tokens_per_expert", tokens}});  // no "imbalance": computed
  }
  return {
      {"step", step},
      {"loss", 8.0 / (1 + 0.1 * step)},
      {"total_loss", 8.0 / (1 + 0.1 * step) + 0.05},
      {"lr", 1e-4 * std::min(step, 10)},
      {"grad_norm", 3.0 / step},
      {"tokens", 2048},
      {"tokens_per_s", 800 + step},
      {"model_tflops_per_s", 0.03},
      {"time",
       {{"step_s", 2.5},
        {"compute_s", 2.2},
        {"comm_exposed_s", 0.3},
        {"comm", {{"tp", comm(0.2)}, {"ep", comm(0.1)}, {"dp", comm(0)}, {"pp", comm(0)}, {"other", comm(0)}}}}},
      {"moe",
       {{"aux_loss", 4.1}, {"z_loss", 0.9}, {"dropped_slots", 0}, {"dropped_fraction", 0.0}, {"layers", layer_list}}},
      {"some_future_field", {{"ignored", true}}}};
}

std::vector<std::string> names_of(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const std::string& p : paths) names.push_back(std::filesystem::path(p).filename().string());
  return names;
}

TEST(RunReport, MoeRunWithPipelineTimelineGetsEveryPicture) {
  TempDir dir;
  std::vector<std::string> lines;
  for (int step = 1; step <= 30; ++step) {
    json r = moe_record(step, 4, {1, 3});
    if (step % 10 == 0) r["val_loss"] = 9.0 / (1 + 0.1 * step);
    if (step == 30) {
      r["pipeline_timeline"] = json::array({
          {{"stage", 0}, {"micro_batch", 0}, {"kind", "forward"}, {"start_s", 0.0}, {"end_s", 0.1}},
          {{"stage", 0}, {"micro_batch", 0}, {"kind", "send"}, {"start_s", 0.1}, {"end_s", 0.11}},
          {{"stage", 1}, {"micro_batch", 0}, {"kind", "recv"}, {"start_s", 0.1}, {"end_s", 0.11}},
          {{"stage", 1}, {"micro_batch", 0}, {"kind", "forward"}, {"start_s", 0.11}, {"end_s", 0.21}},
          {{"stage", 1}, {"micro_batch", 0}, {"kind", "backward"}, {"start_s", 0.21}, {"end_s", 0.41}},
          {{"stage", 0}, {"micro_batch", 0}, {"kind", "backward"}, {"start_s", 0.42}, {"end_s", 0.62}},
      });
    }
    lines.push_back(r.dump());
  }
  const std::string metrics = dir.file("metrics.jsonl");
  write_lines(metrics, lines);

  const std::vector<std::string> written = write_run_report(resolve_metrics_path(dir.path()), "");
  EXPECT_EQ(names_of(written),
            (std::vector<std::string>{"loss.svg", "lr.svg", "throughput.svg", "step_time.svg", "expert_load_layer1.svg",
                                      "expert_load_layer3.svg", "pipeline_timeline.svg", "moe_losses.svg",
                                      "comm_share.svg", "index.html"}));
  for (const std::string& path : written) {
    EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(dir.path()));
    if (std::filesystem::path(path).extension() == ".svg") {
      EXPECT_NO_THROW(parse_xml(read(path))) << path;
    }
  }

  // Loss: total (aux + z differ), train and val (3 evaluations, drawn with markers).
  const XmlElement loss = parse_xml(read(dir.file("loss.svg")));
  ASSERT_EQ(find_groups(loss, "series").size(), 3u);
  std::vector<std::string> loss_legend;
  for (const XmlElement* t : find_all(*find_groups(loss, "legend")[0], "text")) loss_legend.push_back(t->text);
  EXPECT_EQ(loss_legend, (std::vector<std::string>{"total loss (+ aux, z terms)", "train loss", "val loss"}));
  EXPECT_EQ(count_elements(*find_groups(loss, "series")[2], "polyline"), 1u);
  EXPECT_EQ(count_elements(*find_groups(loss, "series")[2], "circle"), 3u);
  // lr.svg and throughput.svg have two panels each.
  EXPECT_EQ(find_groups(parse_xml(read(dir.file("lr.svg"))), "series").size(), 2u);
  EXPECT_EQ(find_groups(parse_xml(read(dir.file("throughput.svg"))), "series").size(), 2u);

  // Step time: 30 bars of compute + exposed TP + exposed EP; zero DP/PP/other are left out.
  const XmlElement step_time = parse_xml(read(dir.file("step_time.svg")));
  EXPECT_EQ(count_elements(*find_groups(step_time, "bars")[0], "rect"), 90u);
  std::vector<std::string> legend;
  for (const XmlElement* t : find_all(*find_groups(step_time, "legend")[0], "text")) legend.push_back(t->text);
  EXPECT_EQ(legend, (std::vector<std::string>{"compute 88.0%", "exposed TP comm 8.0%", "exposed EP all-to-all 4.0%"}));

  // Expert load: 4 experts x 30 steps of cells, then the imbalance panel with two series.
  const XmlElement load = parse_xml(read(dir.file("expert_load_layer3.svg")));
  EXPECT_EQ(count_elements(*find_groups(load, "cells")[0], "rect"), 120u);
  EXPECT_EQ(find_groups(load, "series").size(), 2u);

  // Pipeline: 2 stages, 6 boxes, idle share in the row labels (stage 0 busy 0.31 of 0.62 s).
  const XmlElement pipe = parse_xml(read(dir.file("pipeline_timeline.svg")));
  EXPECT_EQ(count_elements(*find_groups(pipe, "boxes")[0], "rect"), 6u);
  std::vector<std::string> rows;
  for (const XmlElement* t : find_all(*find_groups(pipe, "rows")[0], "text")) rows.push_back(t->text);
  EXPECT_EQ(rows, (std::vector<std::string>{"stage 0 (idle 50%)", "stage 1 (idle 50%)"}));
}

TEST(RunReport, InterleavedPipelineGetsScheduleFactsChunkLabelsAndBubble) {
  MetricsLog log;
  for (int step = 1; step <= 3; ++step) {
    json r = {{"step", step},
              {"pipeline",
               {{"schedule", "interleaved"},
                {"stages", 2},
                {"micro_batches", 2},
                {"virtual_pipeline", 2},
                {"bubble_measured", 0.30 - 0.01 * step},
                {"bubble_formula", 0.25},
                {"busy_s", {1.0, 1.0}}}}};
    if (step == 3) {
      r["pipeline_timeline"] = json::array();
      for (int chunk = 0; chunk < 2; ++chunk) {
        for (int mb = 0; mb < 2; ++mb) {
          const double t = 0.1 * (2 * chunk + mb);
          r["pipeline_timeline"].push_back({{"stage", 0},
                                            {"chunk", chunk},
                                            {"micro_batch", mb},
                                            {"kind", "forward"},
                                            {"start_s", t},
                                            {"end_s", t + 0.1}});
          r["pipeline_timeline"].push_back({{"stage", 1},
                                            {"chunk", chunk},
                                            {"micro_batch", mb},
                                            {"kind", "backward"},
                                            {"start_s", t + 0.1},
                                            {"end_s", t + 0.2}});
        }
      }
    }
    TempDir dir;
    write_lines(dir.file("m.jsonl"), {r.dump()});
    log.steps.push_back(read_metrics_log(dir.file("m.jsonl")).steps[0]);
  }
  const auto files = render_run_report(log);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].first, "pipeline_timeline.svg");
  EXPECT_EQ(files[1].first, "pipeline_bubble.svg");
  const XmlElement pipe = parse_xml(files[0].second);
  EXPECT_EQ(
      find_all(pipe, "title")[0]->text,
      "Pipeline schedule at step 3: interleaved, 2 stages x 2 micro-batches x 2 chunks, bubble 27% (formula 25%)");
  std::vector<std::string> labels;
  for (const XmlElement* t : find_all(*find_groups(pipe, "box-labels")[0], "text")) labels.push_back(t->text);
  EXPECT_EQ(labels, (std::vector<std::string>{"0c0", "0c0", "1c0", "1c0", "0c1", "0c1", "1c1", "1c1"}));
  const XmlElement bubble = parse_xml(files[1].second);
  ASSERT_EQ(find_groups(bubble, "series").size(), 2u);  // measured and formula, 3 markers each
  EXPECT_EQ(count_elements(*find_groups(bubble, "series")[0], "circle"), 3u);
}

TEST(RunReport, DenseSingleRankRunHasNoMoeOrCommPictures) {
  TempDir dir;
  std::vector<std::string> lines;
  for (int step = 1; step <= 5; ++step) {
    json r = {{"step", step},
              {"loss", 5.0 - 0.1 * step},
              {"total_loss", 5.0 - 0.1 * step},
              {"lr", 1e-3},
              {"grad_norm", 1.0},
              {"tokens_per_s", 1000.0},
              {"val_loss", nullptr},
              {"time",
               {{"step_s", 1.0},
                {"compute_s", 1.0},
                {"comm_exposed_s", 0.0},
                {"comm", {{"tp", comm(0)}, {"ep", comm(0)}, {"dp", comm(0)}, {"pp", comm(0)}, {"other", comm(0)}}}}}};
    lines.push_back(r.dump());
  }
  write_lines(dir.file("metrics.jsonl"), lines);
  const std::string out = dir.file("pictures/nested");
  const std::vector<std::string> written = write_run_report(dir.file("metrics.jsonl"), out);
  EXPECT_EQ(names_of(written),
            (std::vector<std::string>{"loss.svg", "lr.svg", "throughput.svg", "step_time.svg", "index.html"}));
  EXPECT_EQ(std::filesystem::path(written[0]).parent_path(), std::filesystem::path(out));
  // Loss equals total loss and there is no val loss: one series.
  EXPECT_EQ(find_groups(parse_xml(read(written[0])), "series").size(), 1u);
  const XmlElement step_time = parse_xml(read(written[3]));
  EXPECT_EQ(count_elements(*find_groups(step_time, "bars")[0], "rect"), 5u);
  EXPECT_EQ(count_elements(*find_groups(step_time, "legend")[0], "text"), 1u);
}

TEST(RunReport, LongRunsAreAveragedIntoAtMost150Columns) {
  MetricsLog log;
  log.path = "memory";
  for (int step = 1; step <= 400; ++step) {
    StepMetrics m;
    m.step = step;
    m.loss = 3;
    m.step_s = 1;
    m.compute_s = 1;
    m.expert_loads.push_back({0, {1, 2, 3, 4, 5, 6, 7, 8}, 8.0 / 4.5});
    log.steps.push_back(m);
  }
  const auto files = render_run_report(log);
  ASSERT_EQ(files.size(), 3u);  // loss, step_time, expert_load_layer0
  EXPECT_EQ(files[2].first, "expert_load_layer0.svg");
  // 400 steps / 150 columns = 2.7 -> buckets of 5 steps (1-5, 6-10, ...) -> 80 columns labelled 5, 10, ...
  const XmlElement load = parse_xml(files[2].second);
  EXPECT_EQ(count_elements(*find_groups(load, "cells")[0], "rect"), 8u * 80u);
  const auto labels = find_all(*find_groups(load, "labels")[0], "text");
  ASSERT_GT(labels.size(), 8u);
  // After the 8 expert labels: every 5th column is labelled, starting at a multiple of 25.
  EXPECT_EQ(labels[8]->text, "25");
  EXPECT_EQ(labels[9]->text, "50");
  const XmlElement bars = parse_xml(files[1].second);
  EXPECT_EQ(count_elements(*find_groups(bars, "bars")[0], "rect"), 80u);
  EXPECT_NE(files[1].second.find("Step time breakdown (mean of 5 steps per bar)"), std::string::npos);
}

TEST(MetricsLog, LaterRecordOfAStepWinsAndNullIsMissing) {
  TempDir dir;
  write_lines(dir.file("m.jsonl"), {R"({"step": 2, "loss": 2.0})", R"({"step": 1, "loss": 1.0, "val_loss": null})", "",
                                    R"({"step": 2, "loss": 2.5, "lr": 0.1})"});
  const MetricsLog log = read_metrics_log(dir.file("m.jsonl"));
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_EQ(log.steps[0].step, 1);
  EXPECT_TRUE(std::isnan(log.steps[0].val_loss));
  EXPECT_EQ(log.steps[1].step, 2);
  EXPECT_DOUBLE_EQ(log.steps[1].loss, 2.5);
  EXPECT_EQ(log.steps[1].line, 4);
  EXPECT_FALSE(log.steps[1].has_moe);
}

// The message of the moe4d::Error that reading `lines` throws.
std::string error_for(const TempDir& dir, const std::vector<std::string>& lines) {
  write_lines(dir.file("bad.jsonl"), lines);
  try {
    write_run_report(dir.file("bad.jsonl"), dir.file("out"));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(MetricsLog, BadInputNamesFileLineAndField) {
  TempDir dir;
  const std::string f = dir.file("bad.jsonl");
  EXPECT_EQ(error_for(dir, {R"({"step": 1})", R"({"step": 2})", "{\"step\": 3, loss: 1}"})
                .rfind(f + ":3: not valid JSON: ", 0),
            0u);
  EXPECT_EQ(error_for(dir, {R"({"step": 1})", R"({"loss": 2.0})"}),
            f + ":2: record has no \"step\" (each line must be one optimizer step)");
  EXPECT_EQ(error_for(dir, {R"({"step": 1, "loss": "low"})"}), f + ":1: \"loss\" must be a number, got a string");
  EXPECT_EQ(error_for(dir, {R"({"step": 1.5})"}), f + ":1: \"step\" must be an integer, got 1.5");
  EXPECT_EQ(error_for(dir, {R"([1, 2])"}), f + ":1: expected one JSON object per line, got an array");
  EXPECT_EQ(error_for(dir, {R"({"step": 1, "time": {"comm": {"tp": {"exposed_s": "x"}}}})"}),
            f + ":1: \"time.comm.tp.exposed_s\" must be a number, got a string");
  EXPECT_EQ(error_for(dir, {R"({"step": 1, "moe": {"layers": [{"layer": 0, "tokens_per_expert": [1, 2]}]}})",
                            R"({"step": 2, "moe": {"layers": [{"layer": 0, "tokens_per_expert": [1, 2, 3]}]}})"}),
            f + ":2: MoE layer 0 has 3 experts here but 2 at line 1");
  EXPECT_EQ(
      error_for(dir,
                {R"({"step": 1, "pipeline_timeline": [{"stage": 0, "kind": "optimizer", "start_s": 0, "end_s": 1}]})"}),
      f + ":1: \"pipeline_timeline[0].kind\" is \"optimizer\", expected forward, backward, send, recv or idle");
  EXPECT_EQ(error_for(dir, {R"({"step": 1, "pipeline_timeline": [{"stage": 0, "kind": "forward", "start_s": 0}]})"}),
            f + ":1: \"pipeline_timeline[0]\" needs start_s and end_s");
  EXPECT_EQ(error_for(dir, {R"({"step": 1, "pipeline": {"schedule": 1}})"}),
            f + ":1: \"pipeline.schedule\" must be a string, got a number");
  EXPECT_EQ(error_for(dir, {"", "  "}), "metrics file " + f + " has no records (expected one JSON object per line)");
}

TEST(MetricsLog, MissingFilesAndDirectories) {
  TempDir dir;
  EXPECT_THROW(
      {
        try {
          read_metrics_log(dir.file("nope.jsonl"));
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()),
                    "cannot open metrics file " + dir.file("nope.jsonl") + ": No such file or directory");
          throw;
        }
      },
      Error);
  EXPECT_THROW(
      {
        try {
          resolve_metrics_path(dir.path());
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()), "run directory " + dir.path() + " has no metrics.jsonl");
          throw;
        }
      },
      Error);
  EXPECT_THROW(resolve_metrics_path(dir.file("missing")), Error);
  write_lines(dir.file("metrics.jsonl"), {R"({"step": 1, "loss": 1})"});
  EXPECT_EQ(resolve_metrics_path(dir.path()), dir.file("metrics.jsonl"));
  EXPECT_EQ(resolve_metrics_path(dir.file("metrics.jsonl")), dir.file("metrics.jsonl"));
  // An output path that is a file.
  EXPECT_THROW(write_run_report(dir.file("metrics.jsonl"), dir.file("metrics.jsonl")), Error);
}

}  // namespace
}  // namespace moe4d

namespace moe4d {
namespace {

// A run with redundant experts: the EP-rank load with and without replicas over the steps and the
// replica map of the last step, read back from the records as the trainer writes them.
TEST(RunReport, ReplicationPictureShowsRankLoadAndReplicaMap) {
  TempDir dir;
  std::vector<std::string> lines;
  for (int step = 1; step <= 6; ++step) {
    json rec = moe_record(step, 4, {1});
    const std::vector<std::vector<int>> placement =
        step < 3 ? std::vector<std::vector<int>>{{0, 1, 2}, {2, 3, 0}} : std::vector<std::vector<int>>{{0, 1, 3}, {2, 3, 0}};
    rec["moe"]["replication"] = {
        {"redundant_experts", 2},
        {"rebalance_interval", 3},
        {"layers",
         {{{"layer", 1}, {"rank_tokens", {120, 130}}, {"rank_tokens_without", {180, 70}}, {"max_mean", 1.04},
           {"max_mean_without", 1.44}, {"replica_bytes", 1e5}, {"next_placement", placement},
           {"replicas", {2, 1, 1, 2}}, {"moved_slots", step == 3 ? 1 : 0}}}}};
    lines.push_back(rec.dump());
  }
  write_lines(dir.file("metrics.jsonl"), lines);
  const auto files = render_run_report(read_metrics_log(dir.file("metrics.jsonl")));
  const auto it = std::find_if(files.begin(), files.end(), [](const auto& f) { return f.first == "replication_layer1.svg"; });
  ASSERT_NE(it, files.end());
  const XmlElement svg = parse_xml(it->second);
  // 4 experts x 2 EP ranks of copies, and the two curves.
  EXPECT_EQ(count_elements(*find_groups(svg, "cells")[0], "rect"), 8u);
  EXPECT_NE(it->second.find("with replicas"), std::string::npos);
  EXPECT_NE(it->second.find("without (same routing)"), std::string::npos);
}

}  // namespace
}  // namespace moe4d
