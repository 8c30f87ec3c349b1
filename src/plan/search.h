// plan/search.h — the layout search: every DP x EP x TP x PP factorisation of the device count x
// micro-batch size x schedule (GPipe, 1F1B, interleaved with v chunks) x recompute x ZeRO stage x
// sequence parallelism (with TP) x rank order, pruned by divisibility, placement and memory, ranked by predicted step time.
//
// Pruning, cheapest first: a factorisation that breaks a divisibility rule (heads, ffn, vocab % tp;
// experts % ep; layers % pp; global batch % dp*ep) or puts TP groups across nodes in every rank
// order is refused once with its reason; every remaining variant's memory is computed (cheap), and
// only the variants that fit are timed, once per distinct placement (rank orders that put every
// group on the same nodes are timed once). Memory is not monotone in the ZeRO stage or the
// recompute setting (ZeRO-3 gather buffers and the rematerialised layer can outweigh what they
// save on tiny models), so no variant is skipped on a guess: tests compare the search with an
// exhaustive enumeration. The top list is a bounded heap, so the inner loop does not allocate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/layout_evaluator.h"

namespace moe4d {

struct SearchSpace {
  std::vector<PipelineSchedule> schedules = {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B,
                                             PipelineSchedule::kInterleaved};
  std::vector<int> virtual_stages = {2, 4};  // chunk counts tried for the interleaved schedule
  std::vector<RecomputeGranularity> recompute = {RecomputeGranularity::kNone, RecomputeGranularity::kSelective,
                                                 RecomputeGranularity::kFull};
  std::vector<int> zero_stages = {0, 1, 2, 3};
  // Sequence parallelism off / on, tried with TP > 1 when tp divides seq_length.
  std::vector<bool> sequence_parallel = {false, true};
  // Context parallelism sizes tried (each dividing dp x ep, 2 x cp dividing seq_length) when
  // seq_length >= context_parallel_from: the long-sequence regime CP exists for.
  std::vector<int> context_parallel = {1, 2, 4, 8};
  int context_parallel_from = 8192;
  int max_micro_batch_size = 16;
  bool search_rank_orders = true;     // false: only tp-ep-dp-pp
  bool allow_tp_across_nodes = false;
};

// A DP x EP x TP x PP split none of whose variants was admitted, and why.
struct RejectedLayout {
  int dp = 1, ep = 1, tp = 1, pp = 1;
  std::string reason;  // e.g. "needs 71.2 GiB of 64 GiB (least memory: zero 3, recompute full, mbs 1, 1f1b)"
};

struct SearchResult {
  int devices = 0;
  std::vector<Evaluation> ranked;        // best (shortest step) first, at most top_n
  std::vector<RejectedLayout> rejected;  // in factorisation order
  int64_t factorizations = 0;
  int64_t candidates = 0;  // variants whose memory was evaluated
  int64_t admitted = 0;    // variants that fit (each timed in every distinct rank order)
  int64_t timed = 0;       // (variant, rank order) pairs timed
  double seconds = 0;
  // Set by break_ties (plan/ranking.h); 0 while `ranked` is in plain step-time order.
  int tied = 0;             // leading rows of `ranked` within the stated error of the fastest
  double fastest_step = 0;  // the fastest row's step time
};

SearchResult search_layouts(const PlanContext& ctx, const SearchSpace& space, int top_n);

// The rank orders the search tries: all 24 permutations, or only tp-ep-dp-pp.
std::vector<RankOrder> candidate_rank_orders(bool all);

// GiB for messages: "64" for whole numbers, else one decimal ("71.2").
std::string format_gib(double bytes);

}  // namespace moe4d
