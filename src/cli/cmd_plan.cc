// cli/cmd_plan.cc — `moe4d plan MODEL CLUSTER`: the parallel-layout planner (plan/planner.h).
//
// This file only maps flags onto a PlanRequest and prints what run_plan returns; the planner's
// behaviour (and its error messages) lives in src/plan and is tested there.
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "interop/hf_architecture.h"
#include "plan/planner.h"

namespace moe4d {

void add_plan_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "rank DP x EP x TP x PP layouts of MODEL on CLUSTER by predicted step time, with memory per device, "
              "placement and the reasons others are refused");
  struct Flags {
    std::string model, cluster, devices, layout, precision, format = "table", export_format;
    int64_t global_batch = 0;
    int seq_length = 0;
    int top = 10;
    int explain = 0;
    double expert_imbalance = 1;
    int redundant_experts = 0;
    int save_interval = 0;
    bool show_rejected = false, async_save = false;
  };
  auto flags = std::make_shared<Flags>();
  cmd->add_option("MODEL", flags->model,
                  "model preset (moe-120b, dense-70b, mixtral-8x7b, deepseek-moe-16b, deepseek-v3-like, qwen3-30b-a3b, qwen3-235b-a22b, moe-1t) or a moe4d config YAML")
      ->required();
  cmd->add_option("CLUSTER", flags->cluster,
                  "cluster preset (atlas-800t-a2, dgx-a100, dgx-h100, dgx-h200) or a cluster YAML (moe4d bench writes one)")
      ->required();
  CLI::Option* global_batch =
      cmd->add_option("--global-batch", flags->global_batch, "sequences per optimizer step (default: the model's)");
  CLI::Option* seq_length = cmd->add_option("--seq-length", flags->seq_length, "tokens per sequence (default: the model's)");
  cmd->add_option("--precision", flags->precision, "fp32, bf16 or fp16 (default: the model's)");
  cmd->add_option("--devices", flags->devices,
                  "device count, or a comma-separated list to sweep (default: the cluster's)");
  cmd->add_option("--layout", flags->layout,
                  "evaluate one layout, e.g. dp=2,ep=8,tp=4,pp=1,mb=16,schedule=1f1b,recompute=full,zero=1 "
                  "(keys dp ep tp pp cp mb mbs schedule v recompute zero order sp), or 'config' for MODEL's parallel_config");
  cmd->add_option("--top", flags->top, "rows of the ranked table")->capture_default_str();
  cmd->add_flag("--show-rejected", flags->show_rejected, "list every refused DP x EP x TP x PP split and why");
  cmd->add_option("--format", flags->format, "table or json")->capture_default_str();
  cmd->add_option("--export", flags->export_format,
                  "print the chosen layout (--layout, --explain RANK, or the best) as moe4d, mindformers or megatron");
  CLI::Option* explain = cmd->add_option("--explain", flags->explain, "full breakdown of row RANK of the table");
  CLI::Option* imbalance = cmd->add_option(
      "--expert-imbalance", flags->expert_imbalance,
      "routed rows of the busiest EP rank over the balanced share (>= 1; e.g. 1.3 measured from a run's "
      "tokens_per_expert); default: balanced routing");
  CLI::Option* redundant = cmd->add_option(
      "--redundant-experts", flags->redundant_experts,
      "replica slots per MoE layer for hot experts (moe.redundant_experts; needs --expert-imbalance): the busiest EP "
      "device's share, memory and transfer are planned with them");
  CLI::Option* save_interval = cmd->add_option(
      "--save-interval", flags->save_interval,
      "steps between checkpoints (checkpoint.interval; default: MODEL's): the report gives each save's blocked time "
      "and its share of the training time");
  cmd->add_flag("--async-save", flags->async_save,
                "plan sharded asynchronous checkpoints (checkpoint.async): the staging buffer is part of the memory");
  cmd->callback([flags, global_batch, seq_length, explain, imbalance, redundant, save_interval] {
    PlanRequest request;
    request.model = flags->model;
    // A Hugging Face config.json (any architecture `ckpt import` reads) as MODEL.
    if (flags->model.size() >= 5 && flags->model.compare(flags->model.size() - 5, 5, ".json") == 0) {
      std::ifstream in(flags->model);
      if (!in) fail("cannot read {}", flags->model);
      nlohmann::json json;
      try {
        in >> json;
      } catch (const nlohmann::json::exception& e) {
        fail("{}: not JSON ({})", flags->model, e.what());
      }
      // The planner plans bf16 training of the shapes: a published checkpoint's weight quantization
      // (e.g. DeepSeek-V3's FP8 blocks), which `ckpt import` refuses, does not change them. Nor does
      // DeepSeek-V3's multi-token-prediction layer, which moe4d does not train (import refuses it).
      if (json.is_object()) {
        json.erase("quantization_config");
        json.erase("num_nextn_predict_layers");
      }
      request.hf_model = hf_model_from_config_json(json, flags->model).model;
    }
    request.cluster = flags->cluster;
    if (global_batch->count() > 0) request.global_batch = flags->global_batch;
    if (seq_length->count() > 0) request.seq_length = flags->seq_length;
    if (!flags->precision.empty()) request.precision = parse_precision(flags->precision);
    if (!flags->devices.empty()) request.devices = parse_device_list(flags->devices);
    request.layout = flags->layout;
    request.top = flags->top;
    request.show_rejected = flags->show_rejected;
    if (flags->format != "table" && flags->format != "json")
      fail("--format {}: expected table or json", flags->format);
    request.json = flags->format == "json";
    request.export_format = flags->export_format;
    if (explain->count() > 0 && flags->explain < 1) fail("--explain {}: expected a rank >= 1", flags->explain);
    request.explain = flags->explain;
    if (imbalance->count() > 0) request.expert_imbalance = flags->expert_imbalance;
    if (redundant->count() > 0) request.redundant_experts = flags->redundant_experts;
    if (save_interval->count() > 0) request.save_interval = flags->save_interval;
    request.async_save = flags->async_save;
    const std::string out = run_plan(request);
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace moe4d
