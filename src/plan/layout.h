// plan/layout.h — one candidate parallel layout: DP x EP x TP x PP, micro-batching, pipeline
// schedule, recompute, ZeRO stage and rank order; parsing and printing of `--layout` strings.
//
// Conventions follow docs/model.md §2: world = dp * ep * tp * pp, EP is carved out of data parallelism
// (dp * ep data replicas), and the rank order lists the fastest-varying dimension first.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "parallel/rank_grid.h"

namespace moe4d {

using RankOrder = std::array<ParallelDim, 4>;  // fastest-varying first

inline constexpr RankOrder kDefaultRankOrder = {ParallelDim::kTP, ParallelDim::kEP, ParallelDim::kDP,
                                                ParallelDim::kPP};

struct Layout {
  int dp = 1;
  int ep = 1;
  int tp = 1;
  int pp = 1;
  int micro_batch_size = 1;  // sequences per micro-batch
  int micro_batch_num = 1;   // micro-batches per data replica per step
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int virtual_stages = 1;    // model chunks per pipeline rank (> 1 only for the interleaved schedule)
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
  int zero_stage = 0;
  RankOrder order = kDefaultRankOrder;
  bool sequence_parallel = false;  // Megatron-style sequence parallelism over the TP group
  // Context parallelism: each sequence split over cp of the dp x ep data replicas (model/context_parallel.h).
  int cp = 1;
  // The expert exchange (model.moe.dispatcher): flat, or node-aware when the EP group spans nodes.
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;

  int world() const { return dp * ep * tp * pp; }
  int data_replicas() const { return dp * ep; }
  int dense_replicas() const { return dp * ep / cp; }  // replicas reading different sequences (DP_dense)
  int size(ParallelDim dim) const;
};

const char* schedule_name(PipelineSchedule schedule);        // "gpipe", "1f1b", "interleaved"
const char* recompute_name(RecomputeGranularity recompute);  // "none", "selective", "full"
std::string rank_order_string(const RankOrder& order);       // "tp-ep-dp-pp"
// Throws moe4d::Error unless `text` is a permutation of tp, ep, dp, pp joined by '-'.
RankOrder parse_rank_order(const std::string& text);

// "dp=2,ep=8,tp=4,pp=1,mbs=1,mb=16,schedule=1f1b,recompute=full,zero=3,order=tp-ep-dp-pp"
// (interleaved adds ",v=2", sequence parallelism ",sp=1", context parallelism ",cp=2", the node-aware
// expert dispatch ",dispatch=hierarchical"). parse_layout reads this back.
std::string layout_to_string(const Layout& layout);
// Short form for tables: "dp2 ep8 tp4 pp1" (" sp" appended under sequence parallelism, " cp2" under CP,
// " hier" under the node-aware expert dispatch).
std::string layout_dims_string(const Layout& layout);

// Parses a `--layout` string: comma-separated key=value with keys dp, ep, tp, pp (default 1),
// mb (= micro_batch_num), mbs (micro-batch size), schedule (gpipe|1f1b|interleaved), v (virtual
// stages, default 2 when interleaved), recompute (none|selective|full), zero (0-3), order, sp (0|1:
// sequence parallelism), cp (context parallelism: divides dp x ep; the global batch splits over the
// dp x ep / cp dense replicas), dispatch (alltoall|hierarchical: model.moe.dispatcher).
// Given one of mb / mbs the other follows from the global batch; given neither, mbs = 1.
// Errors (moe4d::Error): unknown keys or values; a product that is not `devices`, with the
// articles' message "parallel size mismatch: dp 4 x ep 1 x tp 4 x pp 3 = 48, but 64 devices are
// available"; a global batch that does not split into dp * ep * mb * mbs.
Layout parse_layout(const std::string& text, int64_t global_batch, int devices);

// The layout a moe4d config's parallel_config asks for (micro-batch size from the global batch).
// Explicit device lists and per-stage layer counts are not modelled by the planner: refused with a
// moe4d::Error, as are the same mismatches parse_layout refuses.
Layout layout_from_parallel_config(const ParallelConfig& parallel, int64_t global_batch, int devices);

// The parallel_config that runs `layout` (other fields keep `base`'s values).
ParallelConfig layout_to_parallel_config(const Layout& layout, const ParallelConfig& base);

}  // namespace moe4d
