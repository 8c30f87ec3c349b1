// plan/layout_evaluator.h — predicted memory and step time of one layout (the planner's core).
//
// Step time (docs/planner.md §Time). For each pipeline stage s and one micro-batch:
//   F_s = forward compute + TP all-reduces + exposed EP all-to-all (+ embedding / head work)
//   B_s = 2 x forward compute + TP + exposed all-to-all + recompute (full: the forward again with
//         its collectives; selective: the core attention QK^T, softmax, PV + gated products)
//   t_s = F_s + B_s + pipeline send/recv + exposed per-micro-batch ZeRO-2/3 traffic
// The pipeline part is m * max t_s + (sum t_s - max t_s) / v (plan/schedule_model.h); then the
// data-parallel gradient reduction that the backward of the last micro-batch could not hide
// (bucketed: all but the last bucket overlap), the ZeRO-1/2 parameter all-gather, the per-step
// scalar all-reduces (gradient norm, loss) and the tied embedding's gradient all-reduce, and the
// optimizer step (memory-bound). Stragglers: the pipeline part at the pace of the slowest of N
// devices (compute x (1 + sigma sqrt(2 ln N)), DeviceSpec::speed_variation). TP all-reduces (Megatron without sequence parallelism: two per
// layer forward, two backward, on [T, d]) are on the critical path; the expert all-to-all (dispatch
// + combine, forward and backward, T k rows of d) overlaps the expert GEMMs when the model's
// moe.a2a_chunks > 1: exposed = max(a2a, gemm) + min(a2a, gemm) / chunks - gemm.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "plan/cluster_spec.h"
#include "plan/compute_model.h"
#include "plan/layout.h"
#include "plan/memory_model.h"
#include "plan/placement.h"
#include "plan/training_setup.h"

namespace moe4d {

// Everything a search holds fixed.
struct PlanContext {
  std::string model_name;
  ModelConfig model;
  TrainingSetup setup;
  ClusterSpec cluster;
};

struct TimeBreakdown {
  double compute = 0;    // critical stage, all micro-batches, forward + backward (no recompute)
  double recompute = 0;  // extra forward compute of recompute on the critical stage
  double tp_comm = 0;    // exposed, per step
  double ep_comm = 0;
  double pp_comm = 0;
  double dp_comm = 0;    // gradient reduction left after the overlap
  double zero_comm = 0;  // ZeRO gathers/scatters left after the overlap
  double bubble = 0;
  double optimizer = 0;
  double kernel_overhead = 0;  // part of compute + recompute: fixed per-kernel costs on the critical stage
  double straggler = 0;        // the pipeline part's extra at the slowest device's pace
  double step_sync = 0;        // per-step scalar all-reduces and the tied embedding's gradient all-reduce
  double step = 0;
  // Totals before overlap (for the report).
  double ep_comm_total = 0;
  double dp_comm_total = 0;
  double zero_comm_total = 0;
  int critical_stage = 0;

  double communication() const { return tp_comm + ep_comm + pp_comm + dp_comm + zero_comm; }
};

// One device of one pipeline stage over a whole step (all micro-batches, forward + backward), so
// that a prediction can be held line by line against a profiler's timeline (nsys / msprof): compute by
// GEMM class, memory-bound work, each collective's exposed and hidden seconds, and the stage's idle
// (bubble) time. GEMM classes + memory_bound = the stage's compute; busy = compute + recompute + the
// exposed TP, EP, PP and per-micro-batch ZeRO time; busy + idle = the pipeline part of the step.
struct StageTime {
  int stage = 0;
  int layers = 0;
  int moe_layers = 0;
  bool embedding = false, head = false;
  GemmClasses gemms;          // per class, x 3 (forward + input and weight gradients) x micro-batches
  double head_gemm = 0;       // the LM head's [T, d] x [d, V/t], same multiplier
  double memory_bound = 0;    // norms, RoPE, softmax, SiLU, residuals, casts, cross-entropy, embedding gather
  double kernel_overhead = 0;  // fixed per-kernel costs (DeviceSpec::kernel_overhead x kernels)
  double recompute = 0;       // extra forward work of the recompute setting
  double tp_exposed = 0;      // TP all-reduces (or SP reduce-scatter + all-gather): on the critical path
  double ep_exposed = 0, ep_hidden = 0;      // expert all-to-all; hidden behind the expert GEMMs (a2a_chunks)
  double pp_exposed = 0;      // stage-to-stage send/recv
  double zero_exposed = 0, zero_hidden = 0;  // ZeRO-2/3 per-micro-batch gathers and reduce-scatters
  double busy = 0;            // the stage's work inside the pipeline part
  double idle = 0;            // waiting for its neighbours: its share of the pipeline bubble
  double dp_exposed = 0, dp_hidden = 0;      // after the pipeline: this stage's gradient reduction
  double param_gather = 0;    // ZeRO-1/2 all-gather of the updated weights after the step (exposed)
  double optimizer = 0;       // AdamW over the shard it owns (memory-bound)
  double straggler = 0;       // the step's extra at the slowest device's pace (same for every stage)
  double step_sync = 0;       // scalar all-reduces and the tied embedding's gradient all-reduce
};

struct Evaluation {
  Layout layout;
  MemoryBreakdown memory;
  double memory_limit = 0;
  bool fits = false;
  Placement placement;
  TimeBreakdown time;
  double tokens_per_second = 0;
  double mfu = 0;  // model FLOPs / (step * devices * peak)
};

// One move (dispatch or combine) of the expert exchange of one micro-batch on one device, seconds.
// Flat (alltoall, or any dispatcher while the EP group sits on one node): the device's routed rows
// over the EP group. Node-aware (layout.dispatcher hierarchical, docs/moe.md §10): stage 1, one row
// per (token, other node) — tokens x expected_remote_nodes (uniform routing) — across the group's
// nodes, then the routed rows inside the node.
double ep_exchange_seconds(const ClusterSpec& cluster, const ModelConfig& model, const TrainingSetup& setup,
                           const Layout& layout, const Placement& place, double tokens);

// Why the split dp x ep x tp x pp of `layout` cannot run this model on this cluster: device count,
// heads / ffn / vocab % tp, experts % ep, layers % pp, global batch % (dp * ep); empty when it can.
std::string split_problem(const PlanContext& ctx, const Layout& layout);

// Why `layout` cannot run this model on this cluster (divisibility, device count, schedule
// constraints), as one line; empty when it can. TP groups crossing nodes are allowed here (the
// search refuses them separately).
std::string layout_problem(const PlanContext& ctx, const Layout& layout);

// Reusable evaluator: holds per-stage scratch so that a search evaluates candidates without
// allocating. Borrows `ctx`, which must outlive it and not change while it is used (terms of it are
// cached). Not thread-safe (one per thread).
class LayoutEvaluator {
 public:
  explicit LayoutEvaluator(const PlanContext& ctx);
  LayoutEvaluator(const LayoutEvaluator&) = delete;
  LayoutEvaluator& operator=(const LayoutEvaluator&) = delete;

  // Peak memory over the stages (the first pruning step of a search). Layout must be valid.
  MemoryBreakdown memory(const Layout& layout);
  // Memory of one device of every pipeline stage, in stage order (memory() is their largest).
  std::vector<MemoryBreakdown> stage_memories(const Layout& layout);
  // Full evaluation. Layout must be valid (layout_problem empty).
  Evaluation evaluate(const Layout& layout);
  // Time for `layout` given its memory: the last memory() call must have been for a layout with
  // the same sizes, micro-batching, schedule, recompute and ZeRO stage (the rank order may differ,
  // it only moves groups between link tiers). The search uses it to time every rank order once.
  // `placement`, when given, must be compute_placement(layout, devices per node) (the search has it).
  Evaluation evaluate_with_memory(const Layout& layout, const MemoryBreakdown& memory,
                                  const Placement* placement = nullptr);
  // Every stage's step in parts (StageTime). Layout must be valid.
  std::vector<StageTime> stage_times(const Layout& layout);

 private:
  void fill_stage_params(const Layout& layout);
  // The step; with `detail`, also every stage's parts (not on the search's hot path).
  TimeBreakdown time(const Layout& layout, const Placement& placement, std::vector<StageTime>* detail = nullptr);

  // A dense and an MoE layer's compute and the head's for one micro-batch: pure functions of the
  // layout's tp, ep, cp, micro-batch size and sequence parallelism (compute_model.h), which a search
  // asks for again for every split sharing them and every rank order, dispatcher, recompute and
  // ZeRO stage; kept per key (a search meets a few thousand at most), so caching changes no result.
  struct ComputeTerms {
    LayerCompute dense, moe;
    PassCompute head;
  };
  const ComputeTerms& compute_terms(const Layout& layout);

  const PlanContext& ctx_;
  std::map<std::array<int, 5>, ComputeTerms> compute_terms_;
  double model_flops_per_sequence_ = 0;
  std::vector<StageParams> stage_params_;
  std::vector<double> stage_time_;
  std::vector<double> stage_compute_;  // compute + recompute part of stage_time_
  std::vector<double> slowed_time_;    // stage_time_ at the slowest device's pace
};

}  // namespace moe4d
