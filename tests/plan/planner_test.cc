// tests/plan/planner_test.cc — `moe4d plan` behaviour through run_plan (what the CLI prints).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/config_loader.h"
#include "core/error.h"
#include "plan/planner.h"

namespace moe4d {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

PlanRequest articles_request() {
  PlanRequest r;
  r.model = "moe-120b";
  r.cluster = "atlas-800t-a2";
  return r;
}

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("moe4d_plan_test_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = (path_ / name).string();
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

TEST(Planner, TableRanksLayouts) {
  PlanRequest r = articles_request();
  r.top = 3;
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("model moe-120b: 117.6B parameters"), std::string::npos) << out;
  EXPECT_NE(out.find("cluster atlas-800t-a2: 64 devices (8 nodes x 8)"), std::string::npos) << out;
  EXPECT_NE(out.find("\n  1  dp"), std::string::npos) << out;
  EXPECT_NE(out.find("\n  3  dp"), std::string::npos) << out;
  EXPECT_EQ(out.find("\n  4  dp"), std::string::npos) << out;
  EXPECT_NE(out.find("best: "), std::string::npos) << out;
  r.show_rejected = true;
  EXPECT_NE(run_plan(r).find("dp1 ep1 tp16 pp4: TP group crosses nodes: tp 16 > 8 devices per node"), std::string::npos);
}

TEST(Planner, JsonIsSortedAndComplete) {
  PlanRequest r = articles_request();
  r.top = 5;
  r.json = true;
  r.show_rejected = true;
  const nlohmann::json doc = nlohmann::json::parse(run_plan(r));
  ASSERT_EQ(doc["ranked"].size(), 5u);
  EXPECT_EQ(doc["search"]["splits"], 84);
  // Step-time order after the tie group (the rows within the stated error of the fastest).
  const int tied = doc["ranking"]["tied_rows"].get<int>();
  double previous = 0;
  int index = 0;
  for (const auto& row : doc["ranked"]) {
    EXPECT_TRUE(row["fits"].get<bool>());
    EXPECT_EQ(row["tie_with_best"].get<bool>(), index < tied);
    if (index++ >= tied) {
      EXPECT_GE(row["time"]["step_seconds"].get<double>(), previous);
    }
    previous = row["time"]["step_seconds"].get<double>();
    EXPECT_LE(row["memory"]["total_bytes"].get<double>(), row["memory"]["limit_bytes"].get<double>());
    EXPECT_FALSE(row["placement"]["tp"]["crosses_nodes"].get<bool>());
  }
  EXPECT_EQ(doc["rejected"].size(), doc["search"]["rejected_splits"].get<size_t>());
}

// Issue 30 item 6: dp64/ep1 and dp8/ep8 are a few percent apart on moe-120b, inside the planner's 5%
// error: both are marked as ties, the tie goes to less inter-node communication, and the best line says
// what decided it, in the text and the JSON.
TEST(Planner, RowsWithinTheStatedErrorAreTies) {
  PlanRequest r = articles_request();
  r.top = 6;
  r.json = true;
  const nlohmann::json doc = nlohmann::json::parse(run_plan(r));
  const int tied = doc["ranking"]["tied_rows"].get<int>();
  ASSERT_GE(tied, 2);
  EXPECT_DOUBLE_EQ(doc["ranking"]["step_time_error"].get<double>(), 0.05);
  const auto& rows = doc["ranked"];
  EXPECT_EQ(rows[0]["layout"]["dp"], 8);
  EXPECT_EQ(rows[0]["layout"]["ep"], 8);
  bool dp64_tied = false;
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    EXPECT_EQ(rows[i]["tie_with_best"].get<bool>(), i < tied);
    if (i < tied) {
      EXPECT_LE(rows[i]["vs_fastest"].get<double>(), 0.05);
      EXPECT_LE(rows[0]["inter_node_comm_seconds"].get<double>(), rows[i]["inter_node_comm_seconds"].get<double>());
      dp64_tied = dp64_tied || rows[i]["layout"]["dp"] == 64;
    } else {
      EXPECT_GT(rows[i]["vs_fastest"].get<double>(), 0.05);
    }
  }
  EXPECT_TRUE(dp64_tied);
  EXPECT_GT(rows[0]["vs_fastest"].get<double>(), 0);  // not the fastest row: it won the tie
  r.json = false;
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("vs fastest"), std::string::npos) << out;
  EXPECT_NE(out.find("% tie"), std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("best: dp8 ep8 tp1 pp1 (row 1) — rows 1-{} tie (within the planner's 5% step-time error",
                                 tied)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("row 1 has the least inter-node communication"), std::string::npos) << out;
  EXPECT_NE(out.find("rule: fastest; rows within the planner's 5% step-time error of the fastest tie, and ties go to "
                     "less inter-node communication, then less memory"),
            std::string::npos)
      << out;
  // --export takes the best row of this ranking.
  r.export_format = "moe4d";
  EXPECT_NE(run_plan(r).find("expert_parallel: 8"), std::string::npos);
}

// A layout that does not fit gets every change it needs in one suggestion, checked by the memory model.
TEST(Planner, NotFittingLayoutGetsTheWholeSetOfChanges) {
  PlanRequest r = articles_request();
  r.layout = "dp=2,ep=8,tp=4,pp=1,mb=16";
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("DOES NOT FIT"), std::string::npos) << out;
  const std::string key = "all at once: recompute=full,zero=3 fits (";
  const size_t at = out.find(key);
  ASSERT_NE(at, std::string::npos) << out;
  const size_t flag = out.find("--layout ", at);
  ASSERT_NE(flag, std::string::npos) << out;
  r.layout = out.substr(flag + 9, out.find(')', flag) - flag - 9);
  EXPECT_EQ(r.layout, "dp=2,ep=8,tp=4,pp=1,mbs=1,mb=16,schedule=1f1b,recompute=full,zero=3,order=tp-ep-dp-pp");
  EXPECT_NE(run_plan(r).find("— fits"), std::string::npos);
  // One setting missing: only that one is named.
  r.layout = "dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full,zero=2";
  EXPECT_NE(run_plan(r).find("all at once: zero=3 fits ("), std::string::npos);
  // No setting of the split fits: said so, with the least-memory combination.
  r = PlanRequest{};
  r.model = "deepseek-v3-like";
  r.cluster = "dgx-a100";
  r.devices = {16};
  r.layout = "dp=1,ep=16";
  const std::string none = run_plan(r);
  EXPECT_NE(none.find("no setting of recompute, ZeRO stage, sequence parallelism or micro-batch size fits this split "
                      "(the least memory, recompute=full,zero=3, needs"),
            std::string::npos)
      << none;
}

// --explain / --layout show every stage's step in parts, text and JSON (issue 25: compare with a profiler).
TEST(Planner, ExplainBreaksTheStepDownPerStage) {
  PlanRequest r = articles_request();
  r.layout = "dp=2,ep=8,pp=4,mb=16,recompute=full,zero=3,schedule=interleaved,v=2";
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("per stage, one device, the whole step in seconds"), std::string::npos) << out;
  EXPECT_NE(out.find("GEMM routed experts"), std::string::npos) << out;
  EXPECT_NE(out.find("idle (pipeline bubble)"), std::string::npos) << out;
  r.json = true;
  const nlohmann::json doc = nlohmann::json::parse(run_plan(r));
  ASSERT_EQ(doc["stages"].size(), 4u);
  EXPECT_GT(doc["stages"][3]["gemm_seconds"]["lm_head"].get<double>(), 0);
  EXPECT_EQ(doc["stages"][0]["gemm_seconds"]["lm_head"].get<double>(), 0);
  EXPECT_GT(doc["stages"][0]["idle_seconds"].get<double>(), 0);
  EXPECT_GT(doc["stages"][0]["zero_hidden_seconds"].get<double>(), 0);
}

TEST(Planner, RefusesAMismatchedLayout) {
  PlanRequest r = articles_request();
  r.layout = "dp=4,tp=4,pp=3";
  EXPECT_EQ(error_of([&] { run_plan(r); }),
            "parallel size mismatch: dp 4 x ep 1 x tp 4 x pp 3 = 48, but 64 devices are available");
}

TEST(Planner, EvaluatesAUserLayoutAndNamesItsBottleneck) {
  PlanRequest r;
  r.model = "dense-70b";
  r.cluster = "atlas-800t-a2";
  r.layout = "dp=4,tp=16,pp=1,mb=64,recompute=full,zero=3";
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("bottleneck: communication is"), std::string::npos) << out;
  EXPECT_NE(out.find("of the step: the TP group crosses nodes (16 ranks over 2 nodes)"), std::string::npos) << out;
  EXPECT_NE(out.find("rank grid: dp 4 x ep 1 x tp 16 x pp 1 = 64 ranks"), std::string::npos) << out;
  r.layout = "dp=8,tp=4,pp=2,mb=32,recompute=full,zero=3";
  r.json = true;
  const nlohmann::json doc = nlohmann::json::parse(run_plan(r));
  EXPECT_TRUE(doc["fits"].get<bool>());
  EXPECT_GT(doc["time"]["bubble_seconds"].get<double>(), 0);
  r.layout = "dp=8,tp=4,pp=3,mb=32";
  r.json = false;
  EXPECT_EQ(error_of([&] { run_plan(r); }), "parallel size mismatch: dp 8 x ep 1 x tp 4 x pp 3 = 96, but 64 devices are available");
  r.layout = "dp=16,tp=4,pp=1,mb=16,schedule=interleaved";
  EXPECT_EQ(error_of([&] { run_plan(r); }),
            "layout dp=16,ep=1,tp=4,pp=1,mbs=1,mb=16,schedule=interleaved,v=2,recompute=none,zero=0,order=tp-ep-dp-pp "
            "cannot run: the interleaved schedule needs pp >= 2");
}

// --expert-imbalance: the busiest EP rank's expert GEMMs, activations and all-to-all grow; a layout
// without expert parallelism is unaffected; a value below 1 is refused.
TEST(Planner, ExpertImbalanceSlowsTheBusiestExpertRank) {
  PlanRequest r = articles_request();
  r.json = true;
  auto evaluate = [&](const std::string& layout, std::optional<double> imbalance) {
    r.layout = layout;
    r.expert_imbalance = imbalance;
    return nlohmann::json::parse(run_plan(r));
  };
  const std::string ep8 = "dp=2,ep=8,tp=4,pp=1,mb=16";
  const nlohmann::json balanced = evaluate(ep8, std::nullopt), skewed = evaluate(ep8, 1.5);
  EXPECT_GT(skewed["time"]["compute_seconds"].get<double>(), balanced["time"]["compute_seconds"].get<double>());
  EXPECT_GT(skewed["time"]["ep_comm_total_seconds"].get<double>(), balanced["time"]["ep_comm_total_seconds"].get<double>());
  EXPECT_GT(skewed["memory"]["activations_bytes"].get<double>(), balanced["memory"]["activations_bytes"].get<double>());
  const std::string ep1 = "dp=16,ep=1,tp=4,pp=1,mb=16";
  EXPECT_EQ(evaluate(ep1, 1.5)["time"]["step_seconds"], evaluate(ep1, std::nullopt)["time"]["step_seconds"]);
  r.json = false;
  r.expert_imbalance = 0.5;
  EXPECT_EQ(error_of([&] { run_plan(r); }).rfind("--expert-imbalance 0.5: expected", 0), 0u);
}

// --redundant-experts R (docs/expert_replication.md): on the same skew the busiest EP rank's rows,
// hence its expert GEMMs and activations, drop; the replica slots cost memory; an EP size R does
// not divide is refused; R without a skew, or negative, is an error.
TEST(Planner, RedundantExpertsTakeRowsOffTheBusiestRank) {
  PlanRequest r = articles_request();
  r.json = true;
  r.layout = "dp=2,ep=8,tp=4,pp=1,mb=16";
  r.expert_imbalance = 1.5;
  const nlohmann::json skewed = nlohmann::json::parse(run_plan(r));
  r.redundant_experts = 8;
  const nlohmann::json replicated = nlohmann::json::parse(run_plan(r));
  EXPECT_LT(replicated["time"]["compute_seconds"].get<double>(), skewed["time"]["compute_seconds"].get<double>());
  EXPECT_LT(replicated["memory"]["activations_bytes"].get<double>(), skewed["memory"]["activations_bytes"].get<double>());
  EXPECT_GT(replicated["memory"]["weights_fp32_bytes"].get<double>(), skewed["memory"]["weights_fp32_bytes"].get<double>());
  r.json = false;
  r.layout.clear();
  const std::string text = run_plan(r);
  EXPECT_NE(text.find("replication: 8 redundant expert slots per MoE layer"), std::string::npos) << text;
  r.redundant_experts = 12;
  r.layout = "dp=2,ep=8,tp=4,pp=1,mb=16";
  EXPECT_NE(error_of([&] { run_plan(r); }).find("redundant_experts 12 is not divisible by ep 8"), std::string::npos);
  r.expert_imbalance.reset();
  r.redundant_experts = 8;
  EXPECT_EQ(error_of([&] { run_plan(r); }).rfind("--redundant-experts 8 needs --expert-imbalance F", 0), 0u);
  r.redundant_experts = -1;
  EXPECT_EQ(error_of([&] { run_plan(r); }).rfind("--redundant-experts -1: expected", 0), 0u);
}

// With --redundant-experts the planner times the articles' three remedies on one layout: replication,
// the same devices with EP halved, and a larger aux loss (an assumed halving of the excess), and
// names the fastest that fits.
TEST(Planner, ComparesReplicationWithASmallerEpAndALargerAuxLoss) {
  PlanRequest r;
  r.model = "mixtral-8x7b";
  r.cluster = "dgx-h100";
  r.expert_imbalance = 1.6;
  r.redundant_experts = 8;
  r.json = true;
  r.top = 40;  // deep enough to hold rows with EP > 1 (the skew makes them slower than EP 1)
  const nlohmann::json doc = nlohmann::json::parse(run_plan(r));
  ASSERT_TRUE(doc.contains("remedies")) << "no row with EP > 1 in the top 40";
  const nlohmann::json& remedies = doc["remedies"];
  const nlohmann::json& v = remedies["variants"];
  ASSERT_EQ(v.size(), 4u);
  const char* names[] = {"none", "replication", "smaller EP", "aux loss"};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(v[i]["remedy"], names[i]);
  // The comparison runs on the best row with EP > 1.
  const nlohmann::json& row = doc["ranked"][remedies["rank"].get<int>() - 1]["layout"];
  EXPECT_GT(row["ep"].get<int>(), 1);
  EXPECT_EQ(v[0]["busiest_share"], 1.6);
  EXPECT_LT(v[1]["busiest_share"].get<double>(), 1.1);
  EXPECT_EQ(v[1]["redundant_experts"], 8);
  EXPECT_NEAR(v[3]["busiest_share"].get<double>(), 1.3, 1e-12);
  EXPECT_LT(v[2]["busiest_share"].get<double>(), 1.6);
  EXPECT_LT(v[1]["step_seconds"].get<double>(), v[0]["step_seconds"].get<double>());
  EXPECT_GT(v[1]["memory_bytes"].get<double>(), v[0]["memory_bytes"].get<double>());
  // The winner is the fastest variant that fits.
  std::string fastest;
  double best = 0;
  for (const auto& x : v)
    if (x.value("fits", false) && (fastest.empty() || x["step_seconds"].get<double>() < best))
      fastest = x["remedy"], best = x["step_seconds"];
  EXPECT_EQ(remedies["winner"], fastest);
  // Text: the same table, the winner and the labelled assumption.
  r.json = false;
  const std::string text = run_plan(r);
  EXPECT_NE(text.find("fastest that fits: " + fastest), std::string::npos) << text;
  EXPECT_NE(text.find("a guess, not a model"), std::string::npos) << text;
  // A given EP 2 layout: halving EP leaves every expert on every device, no skew.
  r.json = true;
  r.layout = row["string"].get<std::string>();
  r.layout.replace(r.layout.find("ep=" + std::to_string(row["ep"].get<int>())), 4, "ep=2");
  r.layout.replace(r.layout.find("dp=" + std::to_string(row["dp"].get<int>())), 4,
                   "dp=" + std::to_string(row["dp"].get<int>() * row["ep"].get<int>() / 2));
  const nlohmann::json ep2 = nlohmann::json::parse(run_plan(r));
  ASSERT_TRUE(ep2.contains("remedies")) << r.layout;
  EXPECT_EQ(ep2["remedies"]["variants"][2]["busiest_share"], 1.0);
}

TEST(Planner, ExplainShowsOneRowInFull) {
  PlanRequest r = articles_request();
  r.top = 3;
  r.json = true;
  const nlohmann::json table = nlohmann::json::parse(run_plan(r));
  r.json = false;
  r.explain = 2;
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("layout " + table["ranked"][1]["layout"]["string"].get<std::string>()), std::string::npos) << out;
  EXPECT_NE(out.find("memory per device"), std::string::npos);
  EXPECT_NE(out.find("bottleneck: "), std::string::npos);
  EXPECT_NE(out.find("placement (8 devices per node"), std::string::npos);
}

TEST(Planner, SweepsDeviceCounts) {
  PlanRequest r;
  r.model = "dense-70b";
  r.cluster = "atlas-800t-a2";
  r.devices = {32, 64, 128};
  const std::string out = run_plan(r);
  for (const char* n : {"\n      32  ", "\n      64  ", "\n     128  "}) EXPECT_NE(out.find(n), std::string::npos) << out;
  r.json = true;
  const nlohmann::json doc = nlohmann::json::parse(run_plan(r));
  ASSERT_EQ(doc["sweep"].size(), 3u);
  // More cards, more tokens per second.
  EXPECT_GT(doc["sweep"][2]["best"]["tokens_per_second"].get<double>(),
            doc["sweep"][0]["best"]["tokens_per_second"].get<double>());
  r.export_format = "moe4d";
  EXPECT_EQ(error_of([&] { run_plan(r); }), "--explain and --export need one device count, but --devices lists 3");
}

TEST(Planner, ExportsTheChosenLayout) {
  PlanRequest r = articles_request();
  r.export_format = "megatron";
  r.layout = "dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full,zero=3";
  const std::string megatron = run_plan(r);
  EXPECT_EQ(megatron.rfind("# Megatron-LM run of dp=2,ep=8,tp=4", 0), 0u) << megatron;
  r.layout.clear();
  r.export_format = "moe4d";
  const Config best = parse_config(run_plan(r), "best.yaml");
  PlanRequest table = articles_request();
  table.json = true;
  table.top = 1;
  const nlohmann::json doc = nlohmann::json::parse(run_plan(table));
  EXPECT_EQ(best.parallel.data_parallel, doc["ranked"][0]["layout"]["dp"].get<int>());
  EXPECT_EQ(best.parallel.tensor_parallel, doc["ranked"][0]["layout"]["tp"].get<int>());
  r.export_format = "yaml";
  EXPECT_EQ(error_of([&] { run_plan(r); }), "--export yaml: expected moe4d, mindformers or megatron");
}

TEST(Planner, ReadsConfigAndClusterFiles) {
  TempDir dir;
  const std::string config = dir.write("tiny.yaml", R"(model:
  vocab_size: 256
  hidden_size: 64
  num_layers: 4
  num_heads: 4
  ffn_hidden_size: 128
  seq_length: 64
  moe: {num_experts: 4, top_k: 2}
parallel_config:
  data_parallel: 1
  expert_parallel: 2
  micro_batch_num: 4
train:
  global_batch_size: 8
  steps: 10
data:
  train: data/tiny.bin
)");
  PlanRequest r;
  r.model = config;
  r.cluster = std::string(MOE4D_SOURCE_DIR) + "/configs/clusters/this_machine.example.yaml";
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("cluster this-machine-example: 2 devices"), std::string::npos) << out;
  EXPECT_NE(out.find("global batch 8 x seq 64"), std::string::npos) << out;
  EXPECT_NE(out.find("fp32"), std::string::npos) << out;  // the config's precision
  // --layout config evaluates the file's own parallel_config.
  r.layout = "config";
  EXPECT_NE(run_plan(r).find("layout dp=1,ep=2,tp=1,pp=1,mbs=1,mb=4,schedule=1f1b"), std::string::npos);
  // Exported back with the data section kept.
  r.export_format = "moe4d";
  EXPECT_EQ(parse_config(run_plan(r), "again.yaml").data.train, "data/tiny.bin");
  // Overrides.
  r.export_format.clear();
  r.layout.clear();
  r.global_batch = 16;
  r.precision = Precision::kBF16;
  const std::string overridden = run_plan(r);
  EXPECT_NE(overridden.find("global batch 16 x seq 64"), std::string::npos) << overridden;
  EXPECT_NE(overridden.find(", bf16\n"), std::string::npos) << overridden;
}

// Issue 30 item 11: num_layers 2^31 - 1 took 24 s before an answer (layer-by-layer walks in the
// config check, the parameter count, the stage split and the FLOP count). Every one of them is
// closed-form now, so this answers at once (ctest's timeout would catch a walk of 2^31 layers).
TEST(Planner, AbsurdLayerCountsAnswerAtOnce) {
  TempDir dir;
  const std::string config = dir.write("deep.yaml", R"(model:
  vocab_size: 256
  hidden_size: 64
  num_layers: 2147483647
  num_heads: 4
  ffn_hidden_size: 128
  seq_length: 64
  moe: {num_experts: 4, top_k: 2, first_dense_layers: 3, layer_freq: 2}
train:
  global_batch_size: 8
  steps: 10
data:
  train: data/tiny.bin
)");
  PlanRequest r;
  r.model = config;
  r.cluster = "atlas-800t-a2";
  r.show_rejected = true;
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("2147483647 layers"), std::string::npos) << out;
  EXPECT_NE(out.find("no layout fits"), std::string::npos) << out;
  EXPECT_NE(out.find("pp 2 does not divide num_layers 2147483647"), std::string::npos) << out;
}

TEST(Planner, ClearErrorsForBadInputs) {
  PlanRequest r = articles_request();
  r.model = "gpt-5";
  EXPECT_EQ(error_of([&] { run_plan(r); }),
            "model 'gpt-5' is neither a moe4d config file nor a preset (one of: moe-120b, dense-70b, mixtral-8x7b, "
            "deepseek-moe-16b, deepseek-v3-like, qwen3-30b-a3b, qwen3-235b-a22b, moe-1t)");
  r = articles_request();
  r.cluster = "/nowhere/cluster.yaml";
  EXPECT_NE(error_of([&] { run_plan(r); }).find("cannot read cluster file '/nowhere/cluster.yaml'"), std::string::npos);
  r = articles_request();
  r.devices = {12};
  EXPECT_EQ(error_of([&] { run_plan(r); }), "12 devices is not a whole number of 8-device nodes of cluster atlas-800t-a2");
  r = articles_request();
  r.devices = {32, 64};
  r.layout = "dp=4,tp=8";
  EXPECT_EQ(error_of([&] { run_plan(r); }), "--layout evaluates one device count, but --devices lists 2; pass one");
  EXPECT_EQ(error_of([] { parse_device_list("32,x"); }),
            "--devices 32,x: expected positive integers separated by commas, e.g. 32,64,128");
  EXPECT_EQ(error_of([] { parse_precision("int8"); }), "--precision int8: expected fp32, bf16 or fp16");
  r = articles_request();
  r.layout = "config";
  EXPECT_EQ(error_of([&] { run_plan(r); }), "--layout config needs MODEL to be a moe4d config file, not the preset 'moe-120b'");
}

TEST(Planner, NothingFitsExplainsWhy) {
  PlanRequest r;
  r.model = "deepseek-v3-like";
  r.cluster = "dgx-a100";
  r.devices = {16};
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("no layout fits; the reasons for every split:"), std::string::npos) << out;
  EXPECT_NE(out.find("needs "), std::string::npos) << out;
  r.explain = 1;
  EXPECT_NE(error_of([&] { run_plan(r); }).find("no layout of deepseek-v3-like fits 16 devices"), std::string::npos);
}

}  // namespace
}  // namespace moe4d
